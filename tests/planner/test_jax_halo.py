"""jax/halo.py: which reads are a mesh tile plus its neighbours' rows (halo_of), against boxes
written out by hand, and how the exchange pairs devices. The exchange itself runs in the ONNX
CNN fixtures' JAX steps (tests/planner/test_jax_step.py), against the 1-device step."""
from autotile.jax.halo import Halo, _neighbour_pairs, halo_of


def _rows(lo, hi, width=6):
    return ((0, lo), (width, hi))  # (lo, hi) boxes of a (6, rows) tensor split on dim 1


def test_a_3x3_convolutions_rows_on_4_devices():
    """16 rows in tiles of 4 read with one row each side, clipped at the tensor's ends."""
    boxes = [_rows(0, 5), _rows(3, 9), _rows(7, 13), _rows(11, 16)]
    core, halos, wide = halo_of(boxes, (6, 16), (4,))
    assert core == [_rows(0, 4), _rows(4, 8), _rows(8, 12), _rows(12, 16)]
    assert halos == [Halo(dim=1, lo=1, hi=1, axes=(0,), tile=4, n=4)]
    assert wide == [_rows(-1, 5), _rows(3, 9), _rows(7, 13), _rows(11, 17)]


def test_a_strided_convolution_reads_less_after_its_tile():
    """3x3, stride 2, pad 1 on 16 rows in 4 tiles: output rows [2t, 2t + 2) read input rows
    [4t - 1, 4t + 3): one row before the tile, one row of the tile itself not read."""
    boxes = [_rows(0, 3), _rows(3, 7), _rows(7, 11), _rows(11, 15)]
    _, halos, wide = halo_of(boxes, (6, 16), (4,))
    assert halos == [Halo(dim=1, lo=1, hi=-1, axes=(0,), tile=4, n=4)]
    assert wide[0] == _rows(-1, 3)


def test_two_mesh_axes_split_one_dimension_major_first():
    """Mesh (2, 2), rows split over both axes (axis 0 major): tiles in row-major device order."""
    boxes = [_rows(0, 5), _rows(3, 9), _rows(7, 13), _rows(11, 16)]
    _, halos, _ = halo_of(boxes, (6, 16), (2, 2))
    assert halos[0].axes == (0, 1) and halos[0].n == 4
    assert _neighbour_pairs(halos[0], (2, 2)) == [(0, 1), (1, 2), (2, 3)]


def test_the_batch_split_on_another_axis_keeps_its_own_neighbours():
    """Mesh (2, 2): batch over axis 0, rows over axis 1; the row neighbours stay within a batch half."""
    boxes = [((0, 0), (3, 9)), ((0, 7), (3, 16)), ((3, 0), (6, 9)), ((3, 7), (6, 16))]
    core, halos, _ = halo_of(boxes, (6, 16), (2, 2))
    assert halos == [Halo(dim=1, lo=1, hi=1, axes=(1,), tile=8, n=2)]
    assert core[3] == ((3, 8), (6, 16))
    assert _neighbour_pairs(halos[0], (2, 2)) == [(0, 1), (2, 3)]


def test_reads_that_are_not_a_tile_and_its_halo():
    assert halo_of([_rows(0, 5), _rows(3, 9), _rows(6, 13), _rows(11, 16)], (6, 16), (4,)) is None  # uneven halo
    assert halo_of([_rows(0, 4), _rows(4, 8), _rows(8, 12), _rows(12, 16)], (6, 16), (4,)) is None  # plain tiles
    assert halo_of([_rows(0, 9), _rows(0, 13), _rows(3, 16), _rows(7, 16)], (6, 16), (4,)) is None  # not one halo for all
    assert halo_of([_rows(0, 6), _rows(5, 11), _rows(10, 16)], (6, 16), (3,)) is None  # 16 rows in 3 tiles
