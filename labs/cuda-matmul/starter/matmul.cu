// Part 4 — matrix multiplication in CUDA C, C = A @ B (fp32), two ways:
//   matmul_naive: one thread per element of C, reading A and B from global memory;
//   matmul_tiled: TILE x TILE blocks that stage tiles of A and B in shared memory.
// Read README.md, section "Part 4: CUDA matmul", first.
//
// cuda_kernels.py compiles this file with load_inline and exposes
// `matmul_naive(a, b)` and `matmul_tiled(a, b)`. The grader checks, with the
// CUDA profiler, that kernels named matmul_naive_kernel / matmul_tiled_kernel
// ran (and no cuBLAS GEMM did): keep those names.

#include <torch/types.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

constexpr int TILE = 32;  // 32 x 32 = 1024 threads per block (the maximum)

__global__ void matmul_naive_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                    float* __restrict__ C, int M, int N, int K) {
    // TODO (Part 4a): one thread per C[row][col].
    //   row from the y dimension, col from the x dimension (so a warp reads
    //   consecutive columns of B and writes consecutive columns of C: coalesced).
    //   Threads outside C return. Accumulate sum_k A[row*K + k] * B[k*N + col]
    //   in a float and write it to C[row*N + col].
}

__global__ void matmul_tiled_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                    float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    // TODO (Part 4b): this block computes the TILE x TILE tile of C at
    //   (blockIdx.y * TILE, blockIdx.x * TILE); thread (ty, tx) owns one element.
    //   For k0 = 0, TILE, 2*TILE, ... < K:
    //     - each thread loads ONE element of the A tile and ONE of the B tile
    //       into shared memory (0.0f when outside A or B: the edges);
    //     - __syncthreads() so the whole tile is there;
    //     - acc += As[ty][k] * Bs[k][tx] for k in 0..TILE-1;
    //     - __syncthreads() again before the next tile overwrites shared memory.
    //   Finally write acc if (row, col) is inside C.
}

static torch::Tensor check_and_allocate(const torch::Tensor& a, const torch::Tensor& b, const char* name) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), name, ": A and B must be CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, name, ": A and B must be float32");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2, name, ": A and B must be 2-D");
    TORCH_CHECK(a.size(1) == b.size(0), name, ": inner dimensions differ (", a.size(1), " vs ", b.size(0), ")");
    return torch::empty({a.size(0), b.size(1)}, a.options());
}

torch::Tensor matmul_naive(torch::Tensor a, torch::Tensor b) {
    auto c = check_and_allocate(a, b, "matmul_naive");
    auto ac = a.contiguous();  // the kernels assume row-major A and B
    auto bc = b.contiguous();
    // TODO (Part 4a): M, K, N from the shapes; return c if M or N is 0;
    //   dim3 threads(16, 16); dim3 blocks(ceil(N / 16), ceil(M / 16));  (x: columns, y: rows)
    //   launch matmul_naive_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(...);
    //   C10_CUDA_KERNEL_LAUNCH_CHECK(); return c;
    TORCH_CHECK(false, "matmul_naive is not implemented yet: see README.md, section 'Part 4: CUDA matmul'");
    return c;
}

torch::Tensor matmul_tiled(torch::Tensor a, torch::Tensor b) {
    auto c = check_and_allocate(a, b, "matmul_tiled");
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    // TODO (Part 4b): like matmul_naive, with dim3 threads(TILE, TILE) and
    //   blocks of TILE x TILE elements of C.
    TORCH_CHECK(false, "matmul_tiled is not implemented yet: see README.md, section 'Part 4: CUDA matmul'");
    return c;
}
