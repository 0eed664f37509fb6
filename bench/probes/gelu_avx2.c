// Probe, not built by CMake: bias+GELU written by hand with AVX2 intrinsics (the same math as
// codegen/expr_emitter.cpp: degree-5 2^f, exponent-bit 2^n, vdivps), to tell whether a gap to
// memcpy is Tessera's code or the machine. It prints the cache-resident time (compute only)
// and the 4096x4096 time with and without streaming stores and software prefetch, next to
// memcpy of the same bytes.
//   gcc -O2 -mavx2 -mfma -o /tmp/gelu_avx2 bench/probes/gelu_avx2.c && /tmp/gelu_avx2
// Measured on an x86-64-v3 VM (Zen 4, AVX-512 hidden): 0.058 ms cache-resident for 32x4096
// (Tessera's tuned kernel: 0.056 ms) and 0.42-0.61x of memcpy at 4096x4096 (Tessera: ~0.5x):
// compute (~7 ms) and memory (~6 ms) do not overlap there, whoever writes the loop.
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define C 4096
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static inline __m256 gelu(__m256 x){
  __m256 x2=_mm256_mul_ps(x,x);
  __m256 poly=_mm256_fmadd_ps(x2,_mm256_set1_ps(-0.10294324f),_mm256_set1_ps(-2.3022082f));
  __m256 t=_mm256_mul_ps(x,poly);
  t=_mm256_max_ps(t,_mm256_set1_ps(-126.f)); t=_mm256_min_ps(t,_mm256_set1_ps(126.f));
  __m256 j=_mm256_add_ps(t,_mm256_set1_ps(12582912.f));
  __m256 n=_mm256_sub_ps(j,_mm256_set1_ps(12582912.f));
  __m256 f=_mm256_sub_ps(t,n);
  __m256 p=_mm256_set1_ps(1.3276472e-3f);
  p=_mm256_fmadd_ps(p,f,_mm256_set1_ps(9.6755415e-3f));
  p=_mm256_fmadd_ps(p,f,_mm256_set1_ps(5.5507133e-2f));
  p=_mm256_fmadd_ps(p,f,_mm256_set1_ps(0.2402212f));
  p=_mm256_fmadd_ps(p,f,_mm256_set1_ps(0.69314697f));
  p=_mm256_fmadd_ps(p,f,_mm256_set1_ps(1.0f));
  __m256i e=_mm256_slli_epi32(_mm256_sub_epi32(_mm256_castps_si256(j),_mm256_set1_epi32(0x4B400000)),23);
  __m256 s=_mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p),e));
  return _mm256_div_ps(x,_mm256_add_ps(s,_mm256_set1_ps(1.f)));
}
float *x,*y,*b,*s;
void run(int R,int nt,int pf){ for(int r=0;r<R;r++){float*xr=x+(size_t)r*C,*yr=y+(size_t)r*C;
  for(int c=0;c<C;c+=32){ if(pf) _mm_prefetch((const char*)(xr+c+pf),_MM_HINT_T0);
    __m256 v0=gelu(_mm256_fmadd_ps(_mm256_load_ps(xr+c),_mm256_load_ps(s+c),_mm256_load_ps(b+c)));
    __m256 v1=gelu(_mm256_fmadd_ps(_mm256_load_ps(xr+c+8),_mm256_load_ps(s+c+8),_mm256_load_ps(b+c+8)));
    __m256 v2=gelu(_mm256_fmadd_ps(_mm256_load_ps(xr+c+16),_mm256_load_ps(s+c+16),_mm256_load_ps(b+c+16)));
    __m256 v3=gelu(_mm256_fmadd_ps(_mm256_load_ps(xr+c+24),_mm256_load_ps(s+c+24),_mm256_load_ps(b+c+24)));
    if(nt){_mm256_stream_ps(yr+c,v0);_mm256_stream_ps(yr+c+8,v1);_mm256_stream_ps(yr+c+16,v2);_mm256_stream_ps(yr+c+24,v3);}
    else {_mm256_store_ps(yr+c,v0);_mm256_store_ps(yr+c+8,v1);_mm256_store_ps(yr+c+16,v2);_mm256_store_ps(yr+c+24,v3);}}}}
int main(){ size_t N=(size_t)4096*C; x=aligned_alloc(4096,N*4); y=aligned_alloc(4096,N*4); b=aligned_alloc(4096,C*4); s=aligned_alloc(4096,C*4);
 for(size_t i=0;i<N;i++) x[i]=(float)rand()/RAND_MAX*2-1; memset(y,0,N*4); for(int i=0;i<C;i++){b[i]=(float)rand()/RAND_MAX-0.5f; s[i]=1+(float)rand()/RAND_MAX;}
 for(int rep=0;rep<2;rep++){
 { double best=1e9; for(int i=0;i<200;i++){double t0=now(); run(32,0,0); double t=now()-t0; if(t<best)best=t;} printf("cache-resident 32 rows: %.4f ms -> x128 = %.2f ms\n",best*1e3,best*128e3);}
 for(int nt=0;nt<2;nt++) for(int pf=0;pf<=1024;pf+=512){ double best=1e9; for(int i=0;i<6;i++){double t0=now(); run(4096,nt,pf); double t=now()-t0; if(t<best)best=t;}
   double bc=1e9; for(int i=0;i<6;i++){double t0=now(); memcpy(y,x,N*4); double t=now()-t0; if(t<bc)bc=t;}
   printf("4096 rows nt=%d pf=%4d: %.3f ms   memcpy %.3f ms  ratio %.2f\n",nt,pf,best*1e3,bc*1e3,bc/best);} }
}
