#pragma once
// Declarations only, for ProcessGroupGloo.hpp; see ../README.md (gloo_decl).
namespace gloo { namespace transport { class Device; class UnboundBuffer; } }
