// sleep_kernel.cu - the kernel bench/gpu-check's share and overhead checks
// launch on a real GPU, under the name of the fake driver's built-in kernel
// (tests/fakes/README.md): ts_fake_sleep(n) does n dependent multiply-adds,
// a fixed amount of work whatever else runs on the GPU (a loop on the global
// timer would end early after being time-sliced out). gpu-check-share
// calibrates n to the wanted kernel length alone on the GPU. Built with nvcc
// -fatbin for sm_90 (H100/H200) and loaded with cuModuleLoadData.
extern "C" __global__ void ts_fake_sleep(unsigned long long n)
{
    float x = (float)threadIdx.x;
    for (unsigned long long i = 0; i < n; i++)
        x = x * 1.0000001f + 0.5f;
    if (x == 12345.678f) // never true; keeps the loop
        *(volatile float *)nullptr = x;
}
