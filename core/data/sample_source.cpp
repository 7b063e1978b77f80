#include "core/data/sample_source.hpp"

namespace recipe::data {

SampleSource::~SampleSource() = default;

}  // namespace recipe::data
