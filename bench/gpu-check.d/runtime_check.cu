// runtime_check.cu - bench/gpu-check's quota check through the CUDA runtime
// (what PyTorch and most programs use), run under
// LD_PRELOAD=libtessera-cuda.so with TESSERA_CUDA_MEM_LIMIT=QUOTA: the
// runtime reaches the driver through cuGetProcAddress, the shim's side door.
//   runtime_check QUOTA_BYTES
// Checks, one "check=NAME result=ok|FAIL ..." line each (exit status =
// failures): cudaMemGetInfo reports the quota; cudaMalloc, cudaMallocAsync
// (default pool) and cudaMallocManaged of the quota fail with
// cudaErrorMemoryAllocation and a quarter succeeds; a graph whose memory node
// is the quota fails to instantiate.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

static int fails;

static void result(const char *check, bool ok, const char *what, int a, int b)
{
    std::printf("check=rt-%s result=%s %s=%d/%d\n", check, ok ? "ok" : "FAIL", what, a, b);
    fails += !ok;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    size_t q = std::strtoull(argv[1], nullptr, 10), quarter = q / 4;
    if (cudaSetDevice(0) != cudaSuccess)
        return 77;
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    std::printf("check=rt-report result=%s total=%zu quota=%zu\n", tot == q ? "ok" : "FAIL", tot,
                q);
    fails += tot != q;
    void *a = nullptr, *b = nullptr;
    cudaError_t e1 = cudaMalloc(&a, q), e2 = cudaMalloc(&b, quarter);
    cudaGetLastError();
    result("malloc", e1 == cudaErrorMemoryAllocation && e2 == cudaSuccess, "err", e1, e2);
    if (e2 == cudaSuccess)
        cudaFree(b);
    cudaStream_t s;
    cudaStreamCreate(&s);
    e1 = cudaMallocAsync(&a, q, s);
    cudaGetLastError();
    e2 = cudaMallocAsync(&b, quarter, s);
    if (e2 == cudaSuccess)
        cudaFreeAsync(b, s);
    cudaStreamSynchronize(s);
    result("malloc-async", e1 == cudaErrorMemoryAllocation && e2 == cudaSuccess, "err", e1, e2);
    e1 = cudaMallocManaged(&a, q);
    cudaGetLastError();
    e2 = cudaMallocManaged(&b, quarter);
    result("managed", e1 == cudaErrorMemoryAllocation && e2 == cudaSuccess, "err", e1, e2);
    if (e2 == cudaSuccess)
        cudaFree(b);
    cudaGraph_t g;
    cudaGraphNode_t n;
    cudaGraphExec_t x;
    cudaMemAllocNodeParams p = {};
    p.poolProps.allocType = cudaMemAllocationTypePinned;
    p.poolProps.location.type = cudaMemLocationTypeDevice;
    p.poolProps.location.id = 0;
    p.bytesize = q;
    cudaGraphCreate(&g, 0);
    cudaGraphAddMemAllocNode(&n, g, nullptr, 0, &p);
    e1 = cudaGraphInstantiate(&x, g, 0);
    cudaGetLastError();
    result("graph", e1 != cudaSuccess, "err", e1, 0);
    if (e1 == cudaSuccess)
        cudaGraphExecDestroy(x);
    cudaGraphDestroy(g);
    return fails;
}
