"""tessera.torch's CUDA path without a GPU: cuda_standin.py drives the operators through the
bundle's GPU kernels and tessera_cuda_launch against the stand-in CUDA driver in a process of its
own, checking the chip check's error, the launch's stream, grid, block and pointers (the tensors',
the workspace's and the output's from the allocator), no synchronisation, host copy or driver
allocation, capture and replay, the fallback, and negative controls (a wrong stream, swapped
arguments, the host-memory path refused during capture)."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def test_cuda_path_through_the_stand_in_driver(tmp_path):
    fake = os.environ.get("TESSERA_FAKE_CUDA", "")
    if not os.path.isfile(fake):
        pytest.skip("the stand-in CUDA driver was not built (TESSERA_FAKE_CUDA: tests/bundle's tessera_fake_cuda)")
    r = subprocess.run([sys.executable, os.path.join(HERE, "cuda_standin.py"), fake, str(tmp_path)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    done = {line.split()[1] for line in r.stdout.splitlines() if line.startswith("ok ")}
    for op in ("linear", "bias_gelu", "attention"):
        assert {f"{op}_runs_the_gpu_kernel", f"{op}_stream_only", f"{op}_grid_block", f"{op}_pointers"} <= done
    assert {"linear_weight_read_transposed", "linear_few_driver_operations", "context_retained_once",
            "linear_kernel_reads_the_transposed_weight", "runtime_copies_are_counted"} <= done
    assert {"transposed_weight_kept", "transposed_weight_follows_writes", "write_behind_the_version_is_not_seen",
            "forget_copies", "each_weight_its_own_copy", "capture_keeps_no_copy", "copy_kept_after_capture",
            "only_the_output_allocated", "other_shape_own_plan", "copy_shared_across_shapes"} <= done
    assert {"chip_mismatch", "bias_gelu_argument_order", "swapped_arguments_are_seen", "wrong_stream_is_seen",
            "capture_records", "capture_replays", "host_path_refused_in_capture", "fallback"} <= done
    assert r.stdout.rstrip().endswith("all ok")
