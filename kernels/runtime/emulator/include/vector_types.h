// The CPU emulator's stand-in for <vector_types.h>: the CUDA built-ins come
// from the prelude every translation unit starts with, so this is empty.
#pragma once
