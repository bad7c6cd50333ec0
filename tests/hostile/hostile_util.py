"""Shared assertion of the hostile-input tests: exactly autotile.Error, naming the culprit."""
import pytest

from autotile.errors import Error


def raises_naming(fn, *names):
    """Call fn; it must raise exactly autotile.Error whose message contains every name."""
    with pytest.raises(Error) as e:
        fn()
    assert type(e.value) is Error
    for n in names:
        assert n in str(e.value), str(e.value)
    return str(e.value)
