"""The cluster bootstrap's draws have one definition (judges/metrics/bootstrap.resample_batches):
the same rows however they are batched, so every interval with the same seed and number of
clusters resamples the same clusters; small draws are made once a process and cannot be changed
by any one interval (read-only), large ones are never kept."""
import numpy as np
import pytest

from litjudge.judges.metrics import bootstrap
from litjudge.judges.metrics.bootstrap import REUSED_CELLS, resample_batches, resample_counts, resample_indices


@pytest.mark.parametrize("clusters,cells", [(7, 50), (30, 4_000_000), (1001, 3000), (300_000, 4_000_000)])
def test_the_draws_are_one_stream_however_batched(clusters, cells):
    whole = np.random.default_rng(3).integers(0, clusters, (40, clusters))
    assert np.array_equal(np.concatenate(list(resample_batches(3, clusters, 40, cells))), whole)
    assert np.array_equal(resample_indices(3, clusters, 40), whole)


def test_small_draws_are_made_once_and_read_only_large_ones_never_kept():
    a, b = resample_indices(0, 30), resample_indices(0, 30)
    assert a is b and not a.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        a[0, 0] = 1
    counts = resample_counts(0, 30)
    assert counts is resample_counts(0, 30) and not counts.flags.writeable
    assert np.array_equal(counts, np.stack([np.bincount(row, minlength=30) for row in a]))
    big = REUSED_CELLS // 1000 + 1                  # over the size kept: drawn again each time
    before = bootstrap._reused.cache_info().currsize
    assert resample_indices(0, big) is not resample_indices(0, big)
    assert resample_indices(0, big).flags.writeable and bootstrap._reused.cache_info().currsize == before


def test_intervals_on_the_same_clusters_share_the_draws_and_stay_as_they_were():
    """Two intervals over the same 20 clusters resample the same ones: each gives what it gave
    alone, whichever ran first (the kept draws are never changed by either)."""
    clusters = [i // 3 for i in range(60)]
    values = [float(i % 4 == 0) for i in range(60)]
    alone = bootstrap.mean_bootstrap(clusters, values, seed=11)
    bootstrap._reused.cache_clear()
    bootstrap._reused_counts.cache_clear()
    truth = [i % 2 == 0 for i in range(60)]
    bootstrap.balanced_accuracy_bootstrap(clusters, truth, [v > 0 for v in values], seed=11)
    assert bootstrap.mean_bootstrap(clusters, values, seed=11) == alone
