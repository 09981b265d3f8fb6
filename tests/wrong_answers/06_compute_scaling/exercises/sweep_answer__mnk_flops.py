# loses: measured_roofline_tests
# why: achieved FLOP/s from m n k: a multiply-add is 2 FLOPs
from solutions_lib import upstream
from solutions_lib.roofline import time_gemm

start = time.perf_counter()
seconds = np.array([time_gemm(m, n, k) for m, n, k in SHAPES])
achieved = np.array([1.0 * m * n * k for m, n, k in SHAPES]) / seconds
intensity = np.array([upstream.arithmetic_intensity(m, n, k, bytes_per_element=4) for m, n, k in SHAPES])
print(f"sweep took {time.perf_counter() - start:.1f} s")
for (m, n, k), s, f, i in zip(SHAPES, seconds, achieved, intensity):
    print(f"(m, n, k) = ({m:5d}, {n:5d}, {k:5d}): {s * 1e3:9.4f} ms   {f / 1e9:7.1f} GFLOP/s   intensity {i:7.2f} FLOP/byte")
