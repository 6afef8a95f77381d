#pragma once
// Declarations only, for ProcessGroupGloo.hpp; see ../README.md (gloo_decl).
#include <chrono>
namespace gloo { class Context { public: void setTimeout(std::chrono::milliseconds timeout); }; }
