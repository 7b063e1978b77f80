// The recipe reference rendered from the field table: `recipe keys` prints it, and
// docs/recipes.md is exactly its markdown form (a test keeps the two equal).
#pragma once

#include <string>

namespace recipe::dsl {

// Every recipe key with its type, default and meaning, then the derived values; markdown tables.
std::string key_reference_markdown();
// The same as aligned plain text, one key a line.
std::string key_reference_text();

}  // namespace recipe::dsl
