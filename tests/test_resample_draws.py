"""The cluster bootstrap's draws have one definition (judges/metrics/bootstrap.resample_batches):
the same rows however they are batched, so every interval with the same seed and number of
clusters resamples the same clusters; small draws are made once a process and cannot be changed
by any one interval (read-only), large ones are never kept."""
import numpy as np
import pytest

from litjudge.judges.metrics import bootstrap
from litjudge.judges.metrics.bootstrap import REUSED_CELLS, resample_batches, resample_counts, resample_indices
from litjudge.judges.metrics.estimates import Units, balanced_accuracy_of


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
    Units.agreement(clusters, truth, [v > 0 for v in values], balanced_accuracy_of).interval(seed=11)
    assert bootstrap.mean_bootstrap(clusters, values, seed=11) == alone


@pytest.mark.parametrize("clusters,resamples,cells", [(12, 500, 4_000_000), (3000, 200, 50_000), (300_000, 3, 4_000_000)])
def test_resampled_sums_are_the_drawn_clusters_added(clusters, resamples, cells):
    """Sums over each resample are products with its draw counts (bootstrap.resampled_sums): the
    same as gathering the drawn clusters and adding them, kept or not, in batches or at once."""
    rng = np.random.default_rng(clusters)
    per = rng.integers(0, 5, (clusters, 2, 3)).astype(float)            # whole counts: exact either way
    gathered = np.concatenate([per[idx].sum(axis=1) for idx in resample_batches(4, clusters, resamples)])
    assert np.array_equal(bootstrap.resampled_sums(per, 4, resamples, cells), gathered)
    real = rng.random(clusters)                                          # real values: to rounding
    summed = bootstrap.resampled_sums(real, 4, resamples, cells)
    assert summed.shape == (resamples,)
    assert np.allclose(summed, real[resample_indices(4, clusters, resamples)].sum(axis=1), rtol=1e-12, atol=0)


def test_a_cluster_without_a_finite_value_is_left_out_only_of_the_resamples_that_draw_it():
    """A count of 0 times NaN is NaN: values that are not finite are gathered as drawn, so only a
    resample that draws the cluster is NaN (the percentile interval then leaves it out)."""
    per = np.arange(12, dtype=float)
    per[5] = np.nan
    idx = resample_indices(0, 12, 300)
    summed = bootstrap.resampled_sums(per, 0, 300)
    assert np.array_equal(np.isnan(summed), (idx == 5).any(axis=1)) and 0 < np.isnan(summed).sum() < 300
    assert np.array_equal(summed[~np.isnan(summed)], per[idx].sum(axis=1)[~np.isnan(summed)])
