"""The device table: every GPU the device tool lends has a row, found under the name torch gives it."""

import pytest

from hoid.measure.devices import DEVICES, H100, H200, get_device


@pytest.mark.parametrize("name, row", [("NVIDIA H200", H200), ("h200", H200),
                                       ("NVIDIA H100 80GB HBM3", H100), ("h100", H100)])
def test_a_gpu_is_found_by_its_key_and_by_the_name_torch_gives_it(name, row):
    assert get_device(name) is row


def test_an_unknown_gpu_names_the_known_ones():
    with pytest.raises(KeyError, match="h200.*h100"):
        get_device("NVIDIA A100-SXM4-80GB")


def test_every_row_says_where_its_figures_come_from_and_the_hoppers_share_an_arch():
    assert all(d.sources for d in DEVICES.values())
    assert H100.arch == H200.arch == "sm_90" and H100.copy_bandwidth < H200.copy_bandwidth
