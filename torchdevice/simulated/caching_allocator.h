// CUDA's caching allocator as torch's sources define it (c10/cuda/CUDACachingAllocator.cpp, the native one, without
// expandable segments or CUDA graphs' private pools), kept as bookkeeping: its small and large pools of free blocks,
// its segments (what cudaMalloc would give) and the blocks they are split into, at addresses of its own; the memory a
// tensor uses is the host's. What it decides is what a GPU's would: the bytes reserved, when a segment is made,
// split, merged, released, and when an allocation fails with CUDA's out-of-memory error; its statistics are those
// `torch.cuda.memory_stats()` reads. One stream per device (the simulated device's), so the pools are one per size.
// With `torch.cuda.memory._record_memory_history` on, it keeps what CUDA's keeps for `torch.cuda.memory._snapshot`:
// each block's and segment's context (where it was allocated) and a trace of its actions.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace cuda_caching {

constexpr int64_t kMinBlockSize = 512;      // every size is rounded to at least 512 bytes
constexpr int64_t kSmallSize = 1048576;     // the largest "small" allocation: 1 MiB
constexpr int64_t kSmallBuffer = 2097152;   // small allocations are packed in 2 MiB segments
constexpr int64_t kLargeBuffer = 20971520;  // allocations between 1 and 10 MiB split 20 MiB segments
constexpr int64_t kMinLargeAlloc = 10485760;
constexpr int64_t kRoundLarge = 2097152;    // larger segments are rounded up to 2 MiB
constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();
constexpr int kIntervals = 16;              // roundup_power2_divisions' intervals: 1 MiB ... 64 GiB

using Context = std::shared_ptr<c10::GatheredContext>;

// What the trace records, in the order of torch's TraceEntry::Action (the names: the backend's).
enum Action { kAlloc, kFreeRequested, kFreeCompleted, kSegmentAlloc, kSegmentFree, kOom, kActions };

struct TraceEntry {
  Action action;
  int64_t addr, size, time_us;  // an out-of-memory error's addr: the bytes free on the device
  Context context;
};

// _record_memory_history's settings, the same for every device as CUDA's: whether it records, how many trace
// entries it keeps (the last ones), when it gathers a context (0: never, 1: for the state, 2: and allocations'
// entries, 3: and frees'), the actions it skips, and how it gathers one (the backend's: Python's frames).
struct History {
  bool enabled = false;
  size_t max_entries = 1;
  int when = 0;
  std::array<bool, kActions> skip{};
  Context (*gather)() = nullptr;

  // The context of an action of `level` (gathered outside the allocator's lock: gathering takes the GIL).
  Context context(int level) const { return enabled && when >= level && gather != nullptr ? gather() : nullptr; }
};

// PYTORCH_CUDA_ALLOC_CONF's settings (parsed on the Python side as torch parses them).
struct Settings {
  int64_t max_split_size = kUnlimited;
  int64_t max_non_split_rounding = kLargeBuffer;
  int64_t large_segment_size = kLargeBuffer;
  std::array<int64_t, kIntervals> divisions{};  // per power-of-two interval from 1 MiB; 0: none
  double gc_threshold = 0;
  std::string error;  // a bad settings string: torch's words for it, raised at the first allocation
  History history;
};

struct Stat {
  int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void increase(int64_t n) {
    current += n;
    peak = std::max(peak, current);
    allocated += n;
  }
  void decrease(int64_t n) {
    current -= n;
    freed += n;
  }
};

// A stat as CUDA keeps it: for all blocks, the small pool's and the large pool's.
struct StatArray {
  std::array<Stat, 3> of;
  void increase(bool small, int64_t n) {
    of[0].increase(n);
    of[small ? 1 : 2].increase(n);
  }
  void decrease(bool small, int64_t n) {
    of[0].decrease(n);
    of[small ? 1 : 2].decrease(n);
  }
};

struct Block {
  int64_t address, size, requested = 0;
  bool small, allocated = false;
  Block *prev = nullptr, *next = nullptr;  // the blocks of the same segment it was split from
  int64_t gc_count_base = 0;
  Context context_when_allocated, context_when_segment_allocated;  // the latter: a segment's first block's
  Block(int64_t address, int64_t size, bool small) : address(address), size(size), small(small) {}
  bool is_split() const { return prev != nullptr || next != nullptr; }
};

struct BySize {
  bool operator()(const Block* a, const Block* b) const {
    return a->size != b->size ? a->size < b->size : a->address < b->address;
  }
};

struct ByAddress {
  bool operator()(const Block* a, const Block* b) const { return a->address < b->address; }
};

struct Pool {
  std::set<Block*, BySize> blocks;  // the free blocks
  int64_t get_free_blocks_call_count = 0;
  void insert(Block* block) {
    block->gc_count_base = get_free_blocks_call_count;
    blocks.insert(block);
  }
};

inline std::string format_size(int64_t bytes) {
  char text[64];
  if (bytes <= 1024) {
    std::snprintf(text, sizeof(text), "%lld bytes", static_cast<long long>(bytes));
  } else if (bytes <= 1048576) {
    std::snprintf(text, sizeof(text), "%.2f KiB", bytes / 1024.0);
  } else if (bytes <= 1073741824) {
    std::snprintf(text, sizeof(text), "%.2f MiB", bytes / 1048576.0);
  } else {
    std::snprintf(text, sizeof(text), "%.2f GiB", bytes / 1073741824.0);
  }
  return text;
}

inline int floor_log2(int64_t value) { return 63 - __builtin_clzll(static_cast<unsigned long long>(value)); }

// An allocation that failed: what CUDA's out-of-memory observers are told (the segment's size, the memory the
// process may use, the memory free), and CUDA's message.
struct OutOfMemory {
  int64_t alloc_size = 0, allowed = 0, free = 0;
  std::string message;
};

// One device's allocator.
struct Device {
  int index = 0;
  int64_t capacity = 0;  // the card's total memory
  int64_t reserved = 0;  // what its segments hold (total_allocated_memory)
  bool set_fraction = false;
  int64_t allowed = 0;   // set_per_process_memory_fraction's bytes
  int64_t next_address = 0;
  Pool small_pool, large_pool;
  std::set<Block*, ByAddress> segments;  // the first block of each segment (for snapshots)
  StatArray allocation, segment, active, inactive_split, allocated_bytes, reserved_bytes, active_bytes,
      inactive_split_bytes, requested_bytes;
  Stat oversize_allocations, oversize_segments;
  int64_t num_alloc_retries = 0, num_ooms = 0, num_sync_all_streams = 0, num_device_alloc = 0, num_device_free = 0;
  std::vector<TraceEntry> trace;  // a ring of the history's last entries, the next to be replaced at trace_next
  size_t trace_next = 0;

  Pool& pool_of(bool small) { return small ? small_pool : large_pool; }

  void record(const Settings& settings, Action action, int64_t addr, int64_t size, const Context& context) {
    const History& h = settings.history;
    if (!h.enabled || h.skip[action]) {
      return;
    }
    auto now = std::chrono::system_clock::now().time_since_epoch();
    TraceEntry entry{action, addr, size, std::chrono::duration_cast<std::chrono::microseconds>(now).count(),
                     h.when >= 2 ? context : nullptr};
    if (trace.size() < h.max_entries) {
      trace.push_back(std::move(entry));
    } else {
      trace[trace_next] = std::move(entry);
      trace_next = (trace_next + 1) % h.max_entries;
    }
  }

  // The trace, oldest first.
  std::vector<const TraceEntry*> entries() const {
    std::vector<const TraceEntry*> found;
    for (size_t i = 0; i < trace.size(); i++) {
      found.push_back(&trace[(trace_next + i) % trace.size()]);
    }
    return found;
  }

  void clear_trace() {
    trace.clear();
    trace_next = 0;
  }

  static int64_t roundup_power2_next_division(int64_t size, int64_t divisions) {
    if ((size & (size - 1)) == 0) {
      return size;
    }
    int64_t floor = int64_t{1} << floor_log2(size);
    int64_t division = floor >> floor_log2(divisions);
    if (division == 0) {
      return floor << 1;
    }
    int64_t rounded = size & ~(division - 1);
    return rounded == size ? size : rounded + division;
  }

  static int64_t round_size(const Settings& settings, int64_t size) {
    if (size < kMinBlockSize) {
      return kMinBlockSize;
    }
    int interval = std::clamp(floor_log2(size) - floor_log2(kSmallSize), 0, kIntervals - 1);
    int64_t divisions = settings.divisions[interval];
    if (divisions > 1 && size > kMinBlockSize * divisions) {
      return roundup_power2_next_division(size, divisions);
    }
    return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
  }

  static int64_t allocation_size(const Settings& settings, int64_t size) {
    if (size <= kSmallSize) {
      return kSmallBuffer;
    }
    if (size < kMinLargeAlloc) {
      return settings.large_segment_size;
    }
    return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
  }

  // The free block that best fits `size`, taken out of its pool; null where none may serve it.
  Block* free_block_for(const Settings& settings, int64_t size, bool small) {
    auto& pool = pool_of(small);
    if (set_fraction && settings.gc_threshold > 0) {
      pool.get_free_blocks_call_count++;
    }
    Block key(0, size, small);
    auto found = pool.blocks.lower_bound(&key);
    if (found == pool.blocks.end()) {
      return nullptr;
    }
    Block* block = *found;
    if (size < settings.max_split_size && block->size >= settings.max_split_size) {
      return nullptr;  // no oversize block for a small request
    }
    if (size >= settings.max_split_size && block->size >= size + settings.max_non_split_rounding) {
      return nullptr;  // nor one too much larger than a large request
    }
    pool.blocks.erase(found);
    return block;
  }

  // cudaMalloc of a segment of `size` bytes: null where the card (or the process's fraction of it) has no room.
  Block* new_segment(const Settings& settings, int64_t size, bool small, bool retry, const Context& context) {
    if (retry) {
      num_alloc_retries++;
    }
    if ((set_fraction && reserved + size > allowed) || (capacity > 0 && reserved + size > capacity)) {
      return nullptr;
    }
    auto* block = new Block(next_address, size, small);
    next_address += size;
    reserved += size;
    segments.insert(block);
    segment.increase(small, 1);
    reserved_bytes.increase(small, size);
    num_device_alloc++;
    block->context_when_segment_allocated = context;
    record(settings, kSegmentAlloc, block->address, size, context);
    return block;
  }

  void release_segment(const Settings& settings, Block* block, const Context& context) {
    record(settings, kSegmentFree, block->address, block->size,
           context ? context : block->context_when_segment_allocated);
    reserved -= block->size;
    segment.decrease(block->small, 1);
    reserved_bytes.decrease(block->small, block->size);
    if (block->size >= settings.max_split_size) {
      oversize_segments.decrease(1);
    }
    pool_of(block->small).blocks.erase(block);
    segments.erase(block);
    num_device_free++;
    delete block;
  }

  // The free segments no block of which is in use, given back (torch.cuda.empty_cache, and before failing).
  bool release_cached(const Settings& settings, const Context& context = nullptr) {
    num_sync_all_streams++;
    for (auto* pool : {&large_pool, &small_pool}) {
      for (auto it = pool->blocks.begin(); it != pool->blocks.end();) {
        Block* block = *it++;
        if (!block->is_split()) {
          release_segment(settings, block, context);
        }
      }
    }
    return true;
  }

  // With max_split_size set: oversize free segments given back until `size` bytes are, largest first.
  bool release_available_cached(const Settings& settings, int64_t size, bool small, const Context& context) {
    if (settings.max_split_size == kUnlimited) {
      return false;
    }
    auto& pool = pool_of(small);
    Block key(0, size < settings.max_split_size ? settings.max_split_size : size, small);
    auto found = pool.blocks.lower_bound(&key);
    if (found != pool.blocks.end()) {
      release_segment(settings, *found, context);
      return true;
    }
    if (found == pool.blocks.begin()) {
      return false;
    }
    int64_t released = 0;
    --found;
    while (released < key.size && (*found)->size >= settings.max_split_size) {
      auto current = found;
      bool first = current == pool.blocks.begin();
      if (!first) {
        --found;
      }
      released += (*current)->size;
      release_segment(settings, *current, context);
      if (first) {
        break;
      }
    }
    return released >= key.size;
  }

  // garbage_collection_threshold: the least recently reused free segments of the large pool given back until the
  // reserved memory is under the threshold's share of what the process is allowed.
  void collect_garbage(const Settings& settings, const Context& context) {
    auto threshold = static_cast<int64_t>(settings.gc_threshold * static_cast<double>(allowed));
    if (reserved <= threshold) {
      return;
    }
    int64_t target = reserved - threshold, reclaimed = 0, freeable = 0;
    double total_age = 0;
    auto age = [&](const Block* b) { return static_cast<double>(large_pool.get_free_blocks_call_count - b->gc_count_base); };
    for (const Block* block : large_pool.blocks) {
      if (!block->is_split()) {
        total_age += age(block);
        freeable++;
      }
    }
    bool freed = true;
    while (reclaimed < target && freed && freeable > 0) {
      double threshold_age = total_age / static_cast<double>(freeable);
      freed = false;
      for (auto it = large_pool.blocks.begin(); it != large_pool.blocks.end();) {
        Block* block = *it++;
        if (!block->is_split() && age(block) >= threshold_age) {
          freed = true;
          reclaimed += block->size;
          total_age -= age(block);
          freeable--;
          release_segment(settings, block, context);
        }
      }
    }
  }

  // An allocation of `requested` bytes, as CUDA's allocator makes it; null where it fails, `oom` then filled for
  // CUDA's observers and error (raised by the caller, outside its lock, after them). `context`: where it is made
  // (History::context(1)).
  Block* malloc(const Settings& settings, int64_t requested, const Context& context, OutOfMemory& oom) {
    TORCH_CHECK_VALUE(settings.error.empty(), settings.error);
    int64_t size = round_size(settings, requested);
    bool small = size <= kSmallSize;
    int64_t alloc_size = allocation_size(settings, size);
    Block* block = free_block_for(settings, size, small);
    if (block == nullptr) {
      if (set_fraction && settings.gc_threshold > 0) {
        collect_garbage(settings, context);
      }
      block = new_segment(settings, alloc_size, small, false, context);
      if (block == nullptr && release_available_cached(settings, size, small, context)) {
        block = new_segment(settings, alloc_size, small, false, context);
      }
      if (block == nullptr && release_cached(settings, context)) {
        block = new_segment(settings, alloc_size, small, true, context);
      }
      if (block != nullptr && alloc_size >= settings.max_split_size) {
        oversize_segments.increase(1);
      }
    }
    if (block == nullptr) {
      int64_t free_bytes = std::max<int64_t>(capacity - reserved, 0);
      record(settings, kOom, free_bytes, size, context);
      num_ooms++;
      std::string allowed_info = set_fraction ? format_size(allowed) + " allowed; " : "";
      std::string process_info = "Including non-PyTorch memory, this process has " + format_size(reserved) +
                                 " memory in use. ";  // what NVML says of the process: its segments
      int64_t allocated = allocated_bytes.of[0].current, held = reserved_bytes.of[0].current;
      oom = {alloc_size, set_fraction ? allowed : capacity, free_bytes,
             c10::str("CUDA out of memory. Tried to allocate ", format_size(alloc_size), ". GPU ", index,
                      " has a total capacity of ", format_size(capacity), " of which ", format_size(free_bytes),
                      " is free. ", process_info, allowed_info, "Of the allocated memory ", format_size(allocated),
                      " is allocated by PyTorch, and ", format_size(held - allocated),
                      " is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
                      "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
                      "documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html"
                      "#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)")};
      return nullptr;
    }
    bool split = small ? block->size - size >= kMinBlockSize
                       : size < settings.max_split_size && block->size - size > kSmallSize;
    bool already_split = block->is_split();
    if (split) {
      auto* remaining = block;
      block = new Block(remaining->address, size, small);
      block->prev = remaining->prev;
      if (block->prev) {
        block->prev->next = block;
      } else {
        segments.erase(remaining);
        segments.insert(block);
      }
      block->next = remaining;
      remaining->prev = block;
      remaining->address += size;
      remaining->size -= size;
      pool_of(small).insert(remaining);
      if (already_split) {
        inactive_split_bytes.decrease(small, block->size);
      } else {
        inactive_split_bytes.increase(small, remaining->size);
        inactive_split.increase(small, 1);
      }
    } else if (already_split) {
      inactive_split_bytes.decrease(small, block->size);
      inactive_split.decrease(small, 1);
    }
    block->allocated = true;
    block->requested = requested;
    block->context_when_allocated = context;
    record(settings, kAlloc, block->address, requested, context);
    allocation.increase(small, 1);
    allocated_bytes.increase(small, block->size);
    active.increase(small, 1);
    active_bytes.increase(small, block->size);
    requested_bytes.increase(small, requested);
    if (block->size >= settings.max_split_size) {
      oversize_allocations.increase(1);
    }
    return block;
  }

  // `src` merged into `dst` where it is free; the bytes it brought.
  int64_t merge(Block* dst, Block* src) {
    if (src == nullptr || src->allocated) {
      return 0;
    }
    auto& pool = pool_of(dst->small);
    pool.blocks.erase(src);
    if (dst->prev == src) {
      segments.erase(src);
      dst->address = src->address;
      dst->prev = src->prev;
      dst->context_when_segment_allocated = std::move(src->context_when_segment_allocated);
      if (dst->prev) {
        dst->prev->next = dst;
      } else {
        segments.insert(dst);
      }
    } else {
      dst->next = src->next;
      if (dst->next) {
        dst->next->prev = dst;
      }
    }
    int64_t subsumed = src->size;
    dst->size += subsumed;
    delete src;
    return subsumed;
  }

  // `context`: where it is freed (History::context(3)).
  void free(const Settings& settings, Block* block, const Context& context) {
    bool small = block->small;
    block->allocated = false;
    const Context& where = context ? context : block->context_when_allocated;
    record(settings, kFreeRequested, block->address, block->requested, where);
    record(settings, kFreeCompleted, block->address, block->requested, where);
    block->context_when_allocated = nullptr;
    allocation.decrease(small, 1);
    allocated_bytes.decrease(small, block->size);
    if (block->size >= settings.max_split_size) {
      oversize_allocations.decrease(1);
    }
    int64_t size = block->size, requested = block->requested, split_blocks = 0, split_bytes = 0;
    for (Block* neighbour : {block->prev, block->next}) {
      int64_t subsumed = merge(block, neighbour);
      if (subsumed > 0) {
        split_blocks--;
        split_bytes -= subsumed;
      }
    }
    pool_of(small).insert(block);
    if (block->is_split()) {
      split_blocks++;
      split_bytes += block->size;
    }
    if (split_blocks > 0) {
      inactive_split.increase(small, split_blocks);
    } else if (split_blocks < 0) {
      inactive_split.decrease(small, -split_blocks);
    }
    if (split_bytes > 0) {
      inactive_split_bytes.increase(small, split_bytes);
    } else if (split_bytes < 0) {
      inactive_split_bytes.decrease(small, -split_bytes);
    }
    active.decrease(small, 1);
    active_bytes.decrease(small, size);
    requested_bytes.decrease(small, requested);
  }

  // The nine stat arrays in the order of stats()'s row (of a const Device: const).
  template <typename Self>
  static auto arrays(Self& self) {
    return std::array{&self.allocation, &self.segment, &self.active, &self.inactive_split, &self.allocated_bytes,
                      &self.reserved_bytes, &self.active_bytes, &self.inactive_split_bytes, &self.requested_bytes};
  }

  // The statistics in one row: the nine stat arrays (all, small pool, large pool; each current, peak, allocated,
  // freed), the two oversize stats, then num_alloc_retries, num_ooms, num_sync_all_streams, num_device_alloc,
  // num_device_free, max_split_size (-1: unlimited).
  std::vector<int64_t> stats(const Settings& settings) const {
    std::vector<int64_t> row;
    auto add = [&row](const Stat& s) { row.insert(row.end(), {s.current, s.peak, s.allocated, s.freed}); };
    for (const StatArray* array : arrays(*this)) {
      for (const Stat& s : array->of) {
        add(s);
      }
    }
    add(oversize_allocations);
    add(oversize_segments);
    row.insert(row.end(), {num_alloc_retries, num_ooms, num_sync_all_streams, num_device_alloc, num_device_free,
                           settings.max_split_size == kUnlimited ? -1 : settings.max_split_size});
    return row;
  }

  // Peaks start again from what is now (torch.cuda.reset_peak_memory_stats).
  void reset_peaks() {
    for (StatArray* array : arrays(*this)) {
      for (Stat& s : array->of) {
        s.peak = s.current;
      }
    }
    oversize_allocations.peak = oversize_allocations.current;
    oversize_segments.peak = oversize_segments.current;
  }

  // The counts of what was allocated and freed start again (torch.cuda.reset_accumulated_memory_stats).
  void reset_accumulated() {
    for (StatArray* array : arrays(*this)) {
      for (Stat& s : array->of) {
        s.allocated = s.freed = 0;
      }
    }
    for (Stat* s : {&oversize_allocations, &oversize_segments}) {
      s->allocated = s->freed = 0;
    }
    num_alloc_retries = num_ooms = num_sync_all_streams = num_device_alloc = num_device_free = 0;
  }

  // The segments as rows: address, total size, small (1/0), its blocks' count, its context, then per block address,
  // size, requested size, allocated (1/0), its context; a context is its index in `contexts` (-1: none).
  std::vector<int64_t> snapshot(std::vector<Context>& contexts) const {
    std::vector<int64_t> row;
    for (const Block* first : segments) {
      int64_t total = 0, count = 0;
      for (const Block* b = first; b != nullptr; b = b->next) {
        total += b->size;
        count++;
      }
      row.insert(row.end(), {first->address, total, first->small ? 1 : 0, count,
                             index_of(contexts, first->context_when_segment_allocated)});
      for (const Block* b = first; b != nullptr; b = b->next) {
        row.insert(row.end(), {b->address, b->size, b->requested, b->allocated ? 1 : 0,
                               index_of(contexts, b->context_when_allocated)});
      }
    }
    return row;
  }

  // The trace as rows: action, address, size, time in microseconds, context (as in snapshot()).
  std::vector<int64_t> trace_rows(std::vector<Context>& contexts) const {
    std::vector<int64_t> row;
    for (const TraceEntry* e : entries()) {
      row.insert(row.end(), {e->action, e->addr, e->size, e->time_us, index_of(contexts, e->context)});
    }
    return row;
  }

  static int64_t index_of(std::vector<Context>& contexts, const Context& context) {
    if (!context) {
      return -1;
    }
    contexts.push_back(context);
    return static_cast<int64_t>(contexts.size()) - 1;
  }
};

}  // namespace cuda_caching
