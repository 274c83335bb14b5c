// PrefixStore: namespacing decorator over any Store.
#include "meshcomm/error.h"
#include "meshcomm/store.h"

namespace meshcomm {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : prefix_(std::move(prefix)), base_(std::move(base)) {
  if (!base_) throw InvalidArgument("PrefixStore needs a base store");
}

std::string PrefixStore::prefixed(const std::string& key) const {
  return prefix_ + "/" + key;
}

std::vector<std::string> PrefixStore::prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(prefixed(k));
  return out;
}

void PrefixStore::set(const std::string& key, const Bytes& value) {
  base_->set(prefixed(key), value);
}
Bytes PrefixStore::get(const std::string& key) { return base_->get(prefixed(key)); }
int64_t PrefixStore::add(const std::string& key, int64_t amount) {
  return base_->add(prefixed(key), amount);
}
bool PrefixStore::deleteKey(const std::string& key) {
  return base_->deleteKey(prefixed(key));
}
Bytes PrefixStore::compareSet(const std::string& key, const Bytes& expected,
                              const Bytes& desired) {
  return base_->compareSet(prefixed(key), expected, desired);
}
void PrefixStore::wait(const std::vector<std::string>& keys,
                       std::chrono::milliseconds timeout) {
  base_->wait(prefixed(keys), timeout);
}
bool PrefixStore::check(const std::vector<std::string>& keys) {
  return base_->check(prefixed(keys));
}
int64_t PrefixStore::numKeys() { return base_->numKeys(); }
void PrefixStore::append(const std::string& key, const Bytes& value) {
  base_->append(prefixed(key), value);
}
std::vector<Bytes> PrefixStore::multiGet(const std::vector<std::string>& keys) {
  return base_->multiGet(prefixed(keys));
}
void PrefixStore::multiSet(const std::vector<std::string>& keys,
                           const std::vector<Bytes>& values) {
  base_->multiSet(prefixed(keys), values);
}
std::chrono::milliseconds PrefixStore::timeout() const { return base_->timeout(); }
void PrefixStore::setTimeout(std::chrono::milliseconds timeout) {
  base_->setTimeout(timeout);
}

}  // namespace meshcomm
