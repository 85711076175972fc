// A host emulation of CUDA's launch model, for testing Pyrite's kernels without a GPU: the
// kernel sources compile unchanged as C++ and each block's threads run as OS threads, so
// __syncthreads is a real barrier and __shared__ arrays (static here) are shared by the block.
// Blocks run one after another, which CUDA allows.
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>
using std::isfinite;
using std::isinf;

struct dim3 { unsigned x, y, z; };
static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static std::barrier<>* emu_barrier;
static inline void __syncthreads() { emu_barrier->arrive_and_wait(); }
#include <atomic>
template <typename T> static inline T atomicAdd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

// Runs `kernel(p)` over `grid` blocks of `block` threads; `threads` runs each block's threads
// concurrently (kernels that synchronize need it), else one after another.
template <typename P>
static void emu_launch(void (*kernel)(const P), unsigned grid, unsigned block, const void* params, bool threads) {
  P p;
  memcpy(&p, params, sizeof p);
  gridDim = {grid, 1, 1};
  blockDim = {block, 1, 1};
  for (unsigned b = 0; b < grid; b++) {
    if (!threads) {
      blockIdx = {b, 0, 0};
      for (unsigned t = 0; t < block; t++) { threadIdx = {t, 0, 0}; kernel(p); }
      continue;
    }
    std::barrier<> bar(block);
    emu_barrier = &bar;
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < block; t++)
      ts.emplace_back([=] { blockIdx = {b, 0, 0}; threadIdx = {t, 0, 0}; kernel(p); });
    for (auto& th : ts) th.join();
  }
}
