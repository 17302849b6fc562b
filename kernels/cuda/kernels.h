// The CUDA kernels of Ringmaster; so far the element-wise ones. Same contracts as the CPU
// kernels of the same name (kernels/cpu/kernels.h), with device pointers and a stream.
#pragma once

#include "kernels/cuda/adamw.h"
#include "kernels/cuda/gelu.h"
