// The CUDA kernels of Ringmaster: the same contracts as the CPU kernels of the same name
// (kernels/cpu/kernels.h), templated over the storage type T = float or bf16, with device
// pointers and a stream (GEMM-based layers also take the cuBLAS handle, cublas_gemm.h). The
// backend (cuda_compute.h) is what the rest of the project uses; these are its parts.
#pragma once

#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/context_embedding.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/residual.h"
