// The CPU emulator's stand-in for <cuda_runtime.h>: the CUDA built-ins come
// from the prelude every translation unit starts with, so this is empty.
#pragma once
