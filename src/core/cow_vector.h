// cow_vector.h -- a std::vector with shared, copy-on-write storage.
//
// Copies share one buffer (a copy costs a reference count, not the
// elements); the buffer is immutable while shared.  Reading goes through
// const accessors only; every mutator first makes the buffer this object's
// own (copying it if another object shares it), so value semantics are
// those of std::vector.  Used for the large arrays of Metadata (block
// table, slot mapping) that plans keep a copy of at every build.
//
// Thread safety is that of a value: concurrent const use of copies that
// share a buffer is safe; a mutator never writes a buffer another object
// can see.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <vector>

namespace vattn {

// std::allocator whose value-less construct() default-initialises (leaves
// ints uninitialised), so that a buffer about to be overwritten is not
// zeroed first.
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U> &) noexcept {}
  template <class U>
  void construct(U *p) noexcept(std::is_nothrow_default_constructible<U>::value) {
    ::new (static_cast<void *>(p)) U;
  }
  template <class U, class... Args>
  void construct(U *p, Args &&...args) {
    ::new (static_cast<void *>(p)) U(std::forward<Args>(args)...);
  }
};

template <class T>
class CowVector {
 public:
  using Vec = std::vector<T, DefaultInitAllocator<T>>;

  CowVector() = default;
  CowVector(std::initializer_list<T> il) : p_(std::make_shared<Vec>(il)) {}
  explicit CowVector(const std::vector<T> &v) : p_(std::make_shared<Vec>(v.begin(), v.end())) {}
  CowVector &operator=(const std::vector<T> &v) {
    assign(v.begin(), v.end());
    return *this;
  }

  size_t size() const { return p_ ? p_->size() : 0; }
  bool empty() const { return size() == 0; }
  const T *data() const { return p_ ? p_->data() : nullptr; }
  const T &operator[](size_t i) const { return (*p_)[i]; }
  const T *begin() const { return data(); }
  const T *end() const { return data() + size(); }
  // True when `o` shares this buffer (for tests).
  bool shares_with(const CowVector &o) const { return p_ && p_ == o.p_; }

  // The elements as a vector this object owns alone (copied first when
  // shared); valid until the next copy of this object.
  Vec &mut() {
    if (!p_) {
      p_ = std::make_shared<Vec>();
    } else if (p_.use_count() > 1) {
      p_ = std::make_shared<Vec>(*p_);
    } else {
      // Sole owner: pairs with the release in other owners' decrements,
      // so their last reads happen before our writes.
      std::atomic_thread_fence(std::memory_order_acquire);
    }
    return *p_;
  }
  template <class It>
  void assign(It first, It last) {
    if (p_ && p_.use_count() == 1) {
      std::atomic_thread_fence(std::memory_order_acquire);
      p_->assign(first, last);
    } else {
      p_ = std::make_shared<Vec>(first, last);
    }
  }
  void resize(size_t n) { mut().resize(n, T()); }  // new elements are T()
  // n elements this object owns alone, left uninitialised (for a caller
  // that writes all of them); the old contents are dropped.
  T *resize_for_overwrite(size_t n) {
    static_assert(std::is_trivially_copyable<T>::value, "for plain data only");
    if (p_ && p_.use_count() == 1) {
      std::atomic_thread_fence(std::memory_order_acquire);
      p_->clear();
      p_->resize(n);
    } else {
      p_ = std::make_shared<Vec>(n);
    }
    return p_->data();
  }
  void resize(size_t n, const T &v) { mut().resize(n, v); }
  void push_back(const T &v) { mut().push_back(v); }
  void clear() { p_.reset(); }

  friend bool operator==(const CowVector &a, const CowVector &b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!(a[i] == b[i])) return false;
    return true;
  }

 private:
  std::shared_ptr<Vec> p_;
};

}  // namespace vattn
