// The CPU emulator's stand-in for <sm_30_intrinsics.h>: the CUDA built-ins come
// from the prelude every translation unit starts with, so this is empty.
#pragma once
