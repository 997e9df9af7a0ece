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
#include <vector>

namespace vattn {

template <class T>
class CowVector {
 public:
  CowVector() = default;
  CowVector(std::initializer_list<T> il) : p_(std::make_shared<std::vector<T>>(il)) {}
  explicit CowVector(std::vector<T> &&v) : p_(std::make_shared<std::vector<T>>(std::move(v))) {}
  CowVector &operator=(std::vector<T> &&v) {
    p_ = std::make_shared<std::vector<T>>(std::move(v));
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

  // The elements as a std::vector this object owns alone (copied first
  // when shared); valid until the next copy of this object.
  std::vector<T> &mut() {
    if (!p_) {
      p_ = std::make_shared<std::vector<T>>();
    } else if (p_.use_count() > 1) {
      p_ = std::make_shared<std::vector<T>>(*p_);
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
      p_ = std::make_shared<std::vector<T>>(first, last);
    }
  }
  void resize(size_t n) { mut().resize(n); }
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
  std::shared_ptr<std::vector<T>> p_;
};

}  // namespace vattn
