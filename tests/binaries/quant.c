/* Stands in for a CUDA library that nvcc built: a .nv_fatbin section (where nvcc puts device code)
   and an exported C API that a Python wrapper calls through ctypes. The functions are host C so that
   gcc can build it; the scanner reads only the ELF tables. Build: tests/binaries/build.sh. */
#ifdef WITH_DEVICE_CODE
__attribute__((section(".nv_fatbin"), used)) static const unsigned char fatbin[16] = {0x50, 0xed, 0x55, 0xba, 1, 0, 0x10, 0};
#endif

static float clamp(float v) { return v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v); }

void cquantize_blockwise_fp32(const float *x, signed char *q, int n) { for (int i = 0; i < n; i++) q[i] = (signed char)clamp(x[i]); }
void cquantize_blockwise_fp16(const float *x, signed char *q, int n) { cquantize_blockwise_fp32(x, q, n); }
void cdequantize_blockwise_fp32(const signed char *q, float *x, int n) { for (int i = 0; i < n; i++) x[i] = q[i]; }
void cadam_8bit_blockwise_grad_fp32(float *p, const float *g, float lr, int n) { for (int i = 0; i < n; i++) p[i] -= lr * g[i]; }
void cadam_8bit_blockwise_grad_bf16(float *p, const float *g, float lr, int n) { cadam_8bit_blockwise_grad_fp32(p, g, lr, n); }
