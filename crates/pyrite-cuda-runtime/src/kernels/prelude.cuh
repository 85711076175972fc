// Pyrite's CUDA kernel prelude: element types, 16-bit float conversions and strided offsets.
// The same text compiles with NVRTC for the GPU and with a host C++ compiler for the kernel
// tests without a GPU (tests/common/emulator.h supplies blockIdx, __syncthreads and friends).
#define MAXD 8
typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

#ifdef __CUDACC_RTC__
__device__ __forceinline__ float bits_f32(u32 u) { return __uint_as_float(u); }
__device__ __forceinline__ u32 f32_bits(float f) { return __float_as_uint(f); }
__device__ __forceinline__ float f16_to_f32(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16 f32_to_f16(float f) { u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u64 mulhi64(u64 a, u64 b) { return __umul64hi(a, b); }
#else
__device__ inline u64 mulhi64(u64 a, u64 b) { return (u64)(((unsigned __int128)a * b) >> 64); }
__device__ inline float bits_f32(u32 u) { float f; memcpy(&f, &u, 4); return f; }
__device__ inline u32 f32_bits(float f) { u32 u; memcpy(&u, &f, 4); return u; }
__device__ inline float f16_to_f32(u16 h) {
  u32 sign = (u32)(h & 0x8000) << 16, ex = (h >> 10) & 0x1f, man = h & 0x3ff, x;
  if (ex == 0) {
    if (man == 0) { x = sign; }
    else { int e = -1; do { e++; man <<= 1; } while (!(man & 0x400)); man &= 0x3ff; x = sign | ((u32)(127 - 15 - e) << 23) | (man << 13); }
  } else if (ex == 0x1f) { x = sign | 0x7f800000u | (man << 13); }
  else { x = sign | ((ex - 15 + 127) << 23) | (man << 13); }
  return bits_f32(x);
}
__device__ inline u16 f32_to_f16(float f) {
  u32 x = f32_bits(f), sign = (x >> 16) & 0x8000, ex = (x >> 23) & 0xff, man = x & 0x7fffff;
  if (ex == 0xff) return (u16)(sign | 0x7c00 | (man ? (0x200 | (man >> 13)) : 0));
  int e = (int)ex - 127 + 15;
  if (e >= 0x1f) return (u16)(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return (u16)sign;
    man |= 0x800000; int shift = 14 - e; u32 h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (u16)(sign | h);
  }
  u32 h = ((u32)e << 10) | (man >> 13), rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return (u16)(sign | h);
}
#endif

__device__ __forceinline__ float bf16_to_f32(u16 h) { return bits_f32((u32)h << 16); }
__device__ __forceinline__ u16 f32_to_bf16(float f) {
  u32 u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1);
  return (u16)(u >> 16);
}

// Python's floor division and remainder on floats (torch.div(rounding_mode='floor'), %).
__device__ __forceinline__ double py_floor_div(double a, double b) {
  if (b == 0.0) return a / b;
  double m = fmod(a, b), div = (a - m) / b;
  if (m != 0.0 && ((b < 0.0) != (m < 0.0))) div -= 1.0;
  if (div == 0.0) return copysign(0.0, a / b);
  double fl = floor(div);
  return (div - fl > 0.5) ? fl + 1.0 : fl;
}
__device__ __forceinline__ float py_floor_div(float a, float b) {
  if (b == 0.0f) return a / b;
  float m = fmodf(a, b), div = (a - m) / b;
  if (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) div -= 1.0f;
  if (div == 0.0f) return copysignf(0.0f, a / b);
  float fl = floorf(div);
  return (div - fl > 0.5f) ? fl + 1.0f : fl;
}
__device__ __forceinline__ double py_rem(double a, double b) { double m = fmod(a, b); return (m != 0.0 && ((b < 0.0) != (m < 0.0))) ? m + b : m; }
__device__ __forceinline__ float py_rem(float a, float b) { float m = fmodf(a, b); return (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) ? m + b : m; }
template <typename T> __device__ __forceinline__ T int_floor_div(T a, T b) {
  if (b == 0) return 0;
  T q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <typename T> __device__ __forceinline__ T int_rem(T a, T b) {
  if (b == 0) return 0;
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <typename T> __device__ __forceinline__ T int_pow(T a, T b) {
  if (b < 0) return a == 1 ? 1 : (a == (T)-1 ? ((b % 2 == 0) ? 1 : a) : 0);
  T r = 1;
  while (b) { if (b & 1) r = (T)(r * a); a = (T)(a * a); b >>= 1; }
  return r;
}
template <typename T> __device__ __forceinline__ T nan_max(T a, T b) { return (a != a || b != b) ? (a != a ? a : b) : (a > b ? a : b); }
template <typename T> __device__ __forceinline__ T nan_min(T a, T b) { return (a != a || b != b) ? (a != a ? a : b) : (a < b ? a : b); }

// The element offset of linear index `i` in a strided layout of `ndim` dims (last dim fastest).
__device__ __forceinline__ i64 strided_offset(i64 i, int ndim, const i64* sizes, const i64* strides) {
  i64 off = 0;
  for (int d = ndim - 1; d >= 0; d--) { i64 s = sizes[d]; off += (i % s) * strides[d]; i /= s; }
  return off;
}
