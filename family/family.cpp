// Reading a family's flags (see family.hpp).
#include "family/family.hpp"

namespace recipe::core {

bool flag_value(const ArchFlags& f, ArchFlag flag) {
  switch (flag) {
    case flag_norm:
      return f.layernorm;
    case flag_activation:
      return f.gelu;
    case flag_positions:
      return f.learned_positions;
    case flag_bias:
      return f.bias;
    case flag_tied:
      return f.tied;
    case flag_qk_norm:
      return f.qk_norm;
  }
  return false;
}

ArchFlags flags_of(const ArchShape& s) { return {s.layernorm, s.gelu, s.learned_positions, s.bias, s.tied, s.qk_norm}; }

unsigned contradicted_flags(const Family& f, const ArchShape& s) {
  const ArchFlags have = flags_of(s);
  unsigned bad = 0;
  for (ArchFlag flag : kArchFlags)
    if ((f.fixed & flag) && flag_value(have, flag) != flag_value(f.defaults, flag)) bad |= flag;
  return bad;
}

}  // namespace recipe::core
