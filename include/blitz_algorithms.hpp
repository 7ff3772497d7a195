/**
 * @file blitz_algorithms.hpp
 * @brief libblitz's parallel algorithms on blz::pool: parallel_reduce and
 * parallel_sort, built on pool::join and pool::call (blitz.hpp).
 *
 * blitz.hpp includes this header at its end (0.1 and 0.2 had the
 * algorithms in blitz.hpp itself), and this header includes blitz.hpp:
 * either one is enough. C++17; header-only.
 */
#ifndef BLITZ_ALGORITHMS_HPP
#define BLITZ_ALGORITHMS_HPP

#include "blitz.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <type_traits>
#include <utility>

namespace blz {

/// @cond BLZ_DETAIL
namespace detail {

template <class T, class MapRange, class Combine>
T reduce_range(pool &p, std::size_t lo, std::size_t hi, std::size_t grain, MapRange &map_range, Combine &combine) {
    if (hi - lo <= grain) return static_cast<T>(map_range(lo, hi));
    const std::size_t mid = lo + (hi - lo) / 2;
    auto [left, right] = p.join([&] { return reduce_range<T>(p, lo, mid, grain, map_range, combine); },
                                [&] { return reduce_range<T>(p, mid, hi, grain, map_range, combine); });
    return static_cast<T>(combine(std::move(left), std::move(right)));
}

// parallel_sort's leaves, sorted by std::sort: about kSortLeavesPerWorker
// per worker (enough for stealing to even out uneven splits), and never
// smaller than kSortMinLeaf elements. Larger leaves are cheaper: a level of
// partitioning here costs a little more than one inside std::sort.
constexpr std::ptrdiff_t kSortMinLeaf = 4096;
constexpr std::ptrdiff_t kSortLeavesPerWorker = 32;

// How parallel_sort splits a range of n elements on w workers.
struct sort_plan {
    std::ptrdiff_t leaf;   // ranges of at most leaf elements go to std::sort
    std::ptrdiff_t wide;   // longer ranges are partitioned in parallel: fewer of them than workers
    std::ptrdiff_t block;  // the pieces of a parallel partition

    static sort_plan make(std::ptrdiff_t n, std::uint32_t workers) {
        const std::ptrdiff_t w = workers;
        // One worker has nobody to share with: std::sort does it all, with no extra pass.
        if (w <= 1) return {n, std::numeric_limits<std::ptrdiff_t>::max(), n};
        const std::ptrdiff_t leaf = std::max(kSortMinLeaf, n / (kSortLeavesPerWorker * w));
        return {leaf, n / w, std::max(kSortMinLeaf, n / (8 * w))};
    }
};

template <class It, class Compare>
It median_of_three(It a, It b, It c, Compare &comp) {
    if (comp(*a, *b)) {
        if (comp(*b, *c)) return b;
        return comp(*a, *c) ? c : a;
    }
    if (comp(*a, *c)) return a;
    return comp(*b, *c) ? c : b;
}

// Hoare partition of [first, last) around *pivot, which lies outside it:
// returns cut with [first, cut) <= pivot <= [cut, last); elements equal to
// the pivot may go either way, so a run of equal keys is split evenly.
// Unguarded, as in libstdc++'s introsort: an element not less than the
// pivot and one not greater than it lie in the range (the pivot is a
// median of several of its elements), and they stop both scans.
template <class It, class Compare>
It unguarded_partition(It first, It last, It pivot, Compare &comp) {
    for (;;) {
        while (comp(*first, *pivot)) ++first;
        --last;
        while (comp(*pivot, *last)) --last;
        if (!(first < last)) return first;
        std::iter_swap(first, last);
        ++first;
    }
}

// The same partition with bounds checks, for a piece of the range that
// need not hold a stopping element.
template <class It, class Compare>
It guarded_partition(It first, It last, It pivot, Compare &comp) {
    for (;;) {
        while (first < last && comp(*first, *pivot)) ++first;
        while (first < last && comp(*pivot, *(last - 1))) --last;
        if (last - first <= 1) return first;  // one element left: equal to the pivot, it goes right
        std::iter_swap(first, --last);
        ++first;
    }
}

// The partition of a range too long for one worker: both halves are
// partitioned in parallel, giving [<= | >= | <= | >=], then the two middle
// blocks trade places by swapping the shorter one with the far end of the
// other, in parallel too.
template <class It, class Compare>
It parallel_partition(pool &p, It first, It last, It pivot, const sort_plan &plan, Compare &comp) {
    if (last - first <= plan.block) return guarded_partition(first, last, pivot, comp);
    const It mid = first + (last - first) / 2;
    const auto cuts = p.join([&] { return parallel_partition(p, first, mid, pivot, plan, comp); },
                             [&] { return parallel_partition(p, mid, last, pivot, plan, comp); });
    const It left_cut = cuts.first, right_cut = cuts.second;  // variables: C++17 lambdas cannot capture bindings
    const auto swaps = static_cast<std::size_t>(std::min(mid - left_cut, right_cut - mid));
    const It far = right_cut - static_cast<std::ptrdiff_t>(swaps);
    p.parallel_for(0, swaps, [&](std::size_t lo, std::size_t hi) {
        const auto offset = static_cast<std::ptrdiff_t>(lo);
        std::swap_ranges(left_cut + offset, left_cut + static_cast<std::ptrdiff_t>(hi), far + offset);
    }, static_cast<std::size_t>(plan.block));
    return left_cut + (right_cut - mid);
}

// Parallel quicksort: partition around a pseudo-median of nine, sort the
// two parts with join(), down to plan.leaf elements or `depth` levels, then
// std::sort (whose introsort keeps the worst case n log n). Ranges wider
// than plan.wide, where workers would wait for a serial partition, are
// partitioned in parallel.
template <class It, class Compare>
void sort_range(pool &p, It first, It last, const sort_plan &plan, int depth, Compare &comp) {
    const auto n = last - first;
    if (n <= plan.leaf || depth == 0) {
        std::sort(first, last, comp);
        return;
    }
    const auto step = n / 8;
    const It mid = first + n / 2;
    const It pivot = median_of_three(median_of_three(first, first + step, first + 2 * step, comp),
                                     median_of_three(mid - step, mid, mid + step, comp),
                                     median_of_three(last - 1 - 2 * step, last - 1 - step, last - 1, comp), comp);
    std::iter_swap(first, pivot);
    const It cut = n > plan.wide ? parallel_partition(p, first + 1, last, first, plan, comp)
                                 : unguarded_partition(first + 1, last, first, comp);
    p.join([&] { sort_range(p, first, cut, plan, depth - 1, comp); },
           [&] { sort_range(p, cut, last, plan, depth - 1, comp); });
}

}  // namespace detail
/// @endcond

/**
 * A fork-join reduction over the indices [begin, end): the range is split
 * in halves by pool.join() down to grain indices, each piece is reduced by
 * map_range(lo, hi), and the halves' results are combined by
 * combine(left, right) in index order, so combine needs to be associative
 * but not commutative (string concatenation works). No accumulator is
 * shared: each value belongs to one join frame.
 *
 * map_range and combine run concurrently on several workers. If either
 * throws, every other piece still runs, and the leftmost failure's
 * exception is rethrown (each join rethrows its left side's first).
 *
 * @param p         the pool that runs it (from outside, the reduction first moves into it).
 * @param begin     first index.
 * @param end       one past the last index.
 * @param identity  returned when begin == end; its type T is the result's.
 * @param map_range map_range(std::size_t lo, std::size_t hi) returns the reduction of
 *                  [lo, hi) (never empty), convertible to T.
 * @param combine   combine(T left, T right) returns the reduction of both, convertible to T;
 *                  its arguments are rvalues.
 * @param grain     indices per map_range call at most; 0: automatic, about eight pieces per worker.
 * @return the reduction of [begin, end).
 * @throws error BLZ_EINVAL if begin > end or for an empty pool; BLZ_ESHUTDOWN; BLZ_EFORK.
 *         Or an exception of map_range or combine.
 */
template <class T, class MapRange, class Combine>
T parallel_reduce(pool &p, std::size_t begin, std::size_t end, T identity, MapRange map_range, Combine combine,
                  std::size_t grain = 0) {
    if (begin > end) throw error(BLZ_EINVAL, "blz::parallel_reduce: begin > end");
    if (begin == end) {
        if (p.native_handle() == nullptr) throw error(BLZ_EINVAL, "blz::parallel_reduce: empty pool");
        return identity;
    }
    if (grain == 0) grain = detail::automatic_grain(end - begin, p.num_threads());
    return p.call([&] { return detail::reduce_range<T>(p, begin, end, grain, map_range, combine); });
}

/**
 * Sorts [first, last) by comp, like std::sort (not stable), in parallel on
 * pool: a quicksort whose two parts are sorted by pool.join(), with the
 * pivot a pseudo-median of nine, down to pieces of about n / (32 workers)
 * elements (at least 4096), which std::sort sorts. While there are fewer
 * parts than workers, each part's partition is itself split across the
 * workers (its pieces partitioned in parallel, then the misplaced middle
 * blocks swapped), so that no worker waits for a serial pass. The
 * recursion depth is bounded; beyond it std::sort sorts the part, so the
 * worst case stays O(n log n). A pool of one worker sorts the whole range
 * with std::sort on that worker; ranges of 4096 elements or fewer are
 * sorted by std::sort on the calling thread.
 *
 * comp is called concurrently from several workers (one copy, shared), so
 * it must be safe to call that way, and it must be a strict weak ordering
 * (as for std::sort). If comp throws, the exception is rethrown once the
 * other parts have finished, and the range is left in a valid but
 * unspecified state, as std::sort leaves it.
 *
 * @param p     the pool that sorts.
 * @param first random access iterator to the first element.
 * @param last  one past the last element.
 * @param comp  comp(a, b) is true when a goes before b; default std::less<>.
 * @throws error BLZ_EINVAL for an empty pool; BLZ_ESHUTDOWN; BLZ_EFORK. Or comp's exception.
 */
template <class RandomIt, class Compare = std::less<>>
void parallel_sort(pool &p, RandomIt first, RandomIt last, Compare comp = Compare()) {
    static_assert(std::is_base_of_v<std::random_access_iterator_tag,
                                    typename std::iterator_traits<RandomIt>::iterator_category>,
                  "blz::parallel_sort needs random access iterators");
    if (p.native_handle() == nullptr) throw error(BLZ_EINVAL, "blz::parallel_sort: empty pool");
    const std::ptrdiff_t n = last - first;
    if (n <= detail::kSortMinLeaf) {
        std::sort(first, last, comp);
        return;
    }
    const detail::sort_plan plan = detail::sort_plan::make(n, p.num_threads());
    int depth = 0;
    for (auto k = n; k > 1; k /= 2) depth += 2;  // 2 log2(n), as introsort allows
    p.call([&] { detail::sort_range(p, first, last, plan, depth, comp); });
}

}  // namespace blz

#endif  // BLITZ_ALGORITHMS_HPP
