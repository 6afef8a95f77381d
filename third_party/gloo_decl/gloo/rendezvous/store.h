#pragma once
// Declarations only, for ProcessGroupGloo.hpp; see ../README.md (gloo_decl).
#include <chrono>
#include <string>
#include <vector>
namespace gloo { namespace rendezvous {
class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::vector<char>& data) = 0;
  virtual std::vector<char> get(const std::string& key) = 0;
  virtual void wait(const std::vector<std::string>& keys) = 0;
  virtual void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) = 0;
};
}}
