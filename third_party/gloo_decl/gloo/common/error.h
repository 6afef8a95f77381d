#pragma once
// Declarations only, for ProcessGroupGloo.hpp; see ../README.md (gloo_decl).
