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

// CUDA's erfinv/erfinvf, which the C++ library lacks: Giles' approximation refined by two
// Newton steps on erf, good to a few ulps of a double.
static inline double erfinv(double y) {
  if (y != y || y < -1 || y > 1) return NAN;
  if (y == 1 || y == -1) return y * INFINITY;
  double w = -std::log((1.0 - y) * (1.0 + y)), x;
  if (w < 5.0) {
    w -= 2.5;
    x = 2.81022636e-08;
    x = 3.43273939e-07 + x * w; x = -3.5233877e-06 + x * w; x = -4.39150654e-06 + x * w;
    x = 0.00021858087 + x * w; x = -0.00125372503 + x * w; x = -0.00417768164 + x * w;
    x = 0.246640727 + x * w; x = 1.50140941 + x * w;
  } else {
    w = std::sqrt(w) - 3.0;
    x = -0.000200214257;
    x = 0.000100950558 + x * w; x = 0.00134934322 + x * w; x = -0.00367342844 + x * w;
    x = 0.00573950773 + x * w; x = -0.0076224613 + x * w; x = 0.00943887047 + x * w;
    x = 1.00167406 + x * w; x = 2.83297682 + x * w;
  }
  x *= y;
  for (int i = 0; i < 2; i++) x -= (std::erf(x) - y) / (1.1283791670955126 * std::exp(-x * x));
  return x;
}
static inline float erfinvf(float y) { return (float)erfinv((double)y); }

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
