#include "serve/codec.h"

#include <cctype>
#include <charconv>
#include <cstring>
#include <string_view>
#include <nlohmann/json.hpp>
#include <numeric>

namespace gyre::serve {
namespace {

using nlohmann::json;

// Rows nest at most this deep (flatten() recurses once per level).
constexpr std::size_t kMaxRowDims = 32;

json parse(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw BadRequest("the body is not JSON");
  if (!j.is_object()) throw BadRequest("the body is a JSON " + std::string(j.type_name()) + ", not an object");
  return j;
}

std::string shapeString(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::int64_t product(const std::vector<std::int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

// The shape a nested array of numbers has along its first elements.
std::vector<std::int64_t> shapeAlongFirst(const json& j) {
  std::vector<std::int64_t> shape;
  for (const json* e = &j; e->is_array() && !e->empty(); e = &(*e)[0]) shape.push_back(static_cast<std::int64_t>(e->size()));
  return shape;
}

// Appends the numbers of `j` to `values`, checking that it has `shape` from `depth` on (no ragged
// arrays, nothing but numbers).
void flatten(const json& j, std::size_t depth, const std::vector<std::int64_t>& shape, std::vector<float>& values,
             const std::string& what) {
  if (depth == shape.size()) {
    if (!j.is_number())
      throw BadRequest(what + " holds " + (j.is_array() ? "a ragged or empty array" : "a " + std::string(j.type_name())) +
                       " where a number was expected");
    values.push_back(j.get<float>());
    return;
  }
  if (!j.is_array() || static_cast<std::int64_t>(j.size()) != shape[depth])
    throw BadRequest(what + " is ragged: " + (j.is_array() ? "an array of " + std::to_string(j.size()) : "a number") +
                     " where an array of " + std::to_string(shape[depth]) + " was expected");
  for (const json& e : j) flatten(e, depth + 1, shape, values, what);
}

// Rows given with their own shape `given` (the first dimension the rows) as [n, rowShape...].
::torch::Tensor rowsOf(std::vector<float>&& values, const std::vector<std::int64_t>& given,
                       const std::vector<std::int64_t>& rowShape) {
  if (given.empty() || given[0] < 1) throw BadRequest("the request holds no rows");
  const std::int64_t n = given[0];
  std::vector<std::int64_t> shape = {n};
  if (rowShape.empty()) {
    shape.insert(shape.end(), given.begin() + 1, given.end());
  } else {
    const std::int64_t per = static_cast<std::int64_t>(values.size()) / n;
    if (per != product(rowShape))
      throw BadRequest("a row has " + std::to_string(per) + " values; this model takes " +
                       std::to_string(product(rowShape)) + " (shape " + shapeString(rowShape) + ")");
    shape.insert(shape.end(), rowShape.begin(), rowShape.end());
  }
  ::torch::Tensor t = ::torch::empty(shape, ::torch::kFloat32);
  std::memcpy(t.data_ptr<float>(), values.data(), values.size() * sizeof(float));
  return t;
}

::torch::Tensor contiguousFloat(const ::torch::Tensor& output) {
  return output.detach().to(::torch::kFloat32).contiguous();
}

// The rows of `output` as nested arrays ([n, 10]: n arrays of 10 numbers).
json nested(const float* data, const std::int64_t* sizes, std::int64_t dims) {
  if (dims == 0) return *data;
  json a = json::array();
  std::int64_t stride = 1;
  for (std::int64_t d = 1; d < dims; ++d) stride *= sizes[d];
  for (std::int64_t i = 0; i < sizes[0]; ++i) a.push_back(nested(data + i * stride, sizes + 1, dims - 1));
  return a;
}

// The common v1 body, {"instances": [[numbers...], ...]} and nothing else, read straight into
// floats: nlohmann's DOM spends most of a one-row request's time on the ingress. Gives false for
// anything else (another key, a string, a ragged array, a number JSON does not allow), which the
// DOM reader then reads or refuses with its message. The numbers convert as the DOM's do:
// integers through int64, the others through double.
class InstancesReader {
 public:
  explicit InstancesReader(const std::string& body) : p_(body.data()), end_(body.data() + body.size()) {}

  bool read(std::vector<float>& values, std::vector<std::int64_t>& shape) {
    values_ = &values;
    shape_ = &shape;
    if (!literal('{') || !literal('"')) return false;
    static constexpr std::string_view kKey = "instances\"";
    if (end_ - p_ < static_cast<std::ptrdiff_t>(kKey.size()) || std::string_view(p_, kKey.size()) != kKey) return false;
    p_ += kKey.size();
    if (!literal(':') || !array(0) || !literal('}')) return false;
    space();
    return p_ == end_;
  }

 private:
  void space() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool literal(char c) {
    space();
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }
  // An array at `depth`: of numbers at the deepest level, of arrays above it, each level as long
  // as every other array at that level.
  bool array(std::size_t depth) {
    if (depth >= kMaxDepth || !literal('[')) return false;
    space();
    if (p_ == end_ || *p_ == ']') return false;  // empty
    const bool numbers = *p_ != '[';
    if (numbers && leafDepth_ == kNone) leafDepth_ = depth;
    if (numbers ? leafDepth_ != depth : leafDepth_ != kNone && depth >= leafDepth_) return false;
    std::int64_t n = 0;
    do {
      if (numbers ? !number() : !array(depth + 1)) return false;
      ++n;
    } while (literal(','));
    if (!literal(']')) return false;
    if (depth >= shape_->size()) shape_->resize(depth + 1, -1);
    if ((*shape_)[depth] < 0) (*shape_)[depth] = n;
    return (*shape_)[depth] == n;
  }
  bool number() {
    space();
    const char* start = p_;
    if (p_ < end_ && *p_ == '-') ++p_;
    if (p_ == end_ || !std::isdigit(static_cast<unsigned char>(*p_))) return false;
    if (*p_ == '0' && p_ + 1 < end_ && std::isdigit(static_cast<unsigned char>(p_[1]))) return false;
    while (p_ < end_ && std::isdigit(static_cast<unsigned char>(*p_))) ++p_;
    bool integer = true;
    if (p_ < end_ && *p_ == '.') {
      integer = false;
      ++p_;
      if (p_ == end_ || !std::isdigit(static_cast<unsigned char>(*p_))) return false;
      while (p_ < end_ && std::isdigit(static_cast<unsigned char>(*p_))) ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      integer = false;
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || !std::isdigit(static_cast<unsigned char>(*p_))) return false;
      while (p_ < end_ && std::isdigit(static_cast<unsigned char>(*p_))) ++p_;
    }
    if (integer) {
      std::int64_t v = 0;
      const auto [q, ec] = std::from_chars(start, p_, v);
      if (ec != std::errc() || q != p_) return false;  // beyond int64: the DOM's way
      values_->push_back(static_cast<float>(v));
    } else {
      double v = 0;
      const auto [q, ec] = std::from_chars(start, p_, v);
      if (ec != std::errc() || q != p_) return false;
      values_->push_back(static_cast<float>(v));
    }
    return true;
  }

  const char* p_;
  const char* end_;
  std::vector<float>* values_ = nullptr;
  std::vector<std::int64_t>* shape_ = nullptr;
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  static constexpr std::size_t kMaxDepth = 32;
  std::size_t leafDepth_ = kNone;
};

}  // namespace

::torch::Tensor decodeV1(const std::string& body, const std::vector<std::int64_t>& rowShape) {
  {
    std::vector<float> values;
    std::vector<std::int64_t> shape;
    if (InstancesReader(body).read(values, shape)) return rowsOf(std::move(values), shape, rowShape);
  }
  const json j = parse(body);
  const auto it = j.find("instances");
  if (it == j.end()) throw BadRequest("the body has no \"instances\" (the v1 shape: {\"instances\": [row, ...]})");
  if (!it->is_array() || it->empty()) throw BadRequest("\"instances\" is not a non-empty array of rows");
  const std::vector<std::int64_t> shape = shapeAlongFirst(*it);
  if (shape.size() > kMaxRowDims) throw BadRequest("\"instances\" is nested deeper than " + std::to_string(kMaxRowDims) + " arrays");
  std::vector<float> values;
  flatten(*it, 0, shape, values, "\"instances\"");
  return rowsOf(std::move(values), shape, rowShape);
}

::torch::Tensor decodeV2(const std::string& body, const std::vector<std::int64_t>& rowShape) {
  const json j = parse(body);
  const auto inputs = j.find("inputs");
  if (inputs == j.end() || !inputs->is_array() || inputs->size() != 1)
    throw BadRequest("the body has no \"inputs\" array of one tensor (the v2 shape: {\"inputs\": [{\"name\", "
                     "\"shape\", \"datatype\", \"data\"}]})");
  const json& in = (*inputs)[0];
  if (!in.is_object()) throw BadRequest("\"inputs\"[0] is not an object");
  const std::string datatype = in.value("datatype", "");
  if (datatype != "FP32" && datatype != "FP64" && datatype != "INT32" && datatype != "INT64")
    throw BadRequest("datatype '" + datatype + "' is not one this server takes (FP32, FP64, INT32, INT64)");
  const auto shapeIt = in.find("shape");
  if (shapeIt == in.end() || !shapeIt->is_array() || shapeIt->empty())
    throw BadRequest("\"inputs\"[0] has no \"shape\"");
  std::vector<std::int64_t> shape;
  for (const json& d : *shapeIt) {
    if (!d.is_number_integer() || d.get<std::int64_t>() < 1)
      throw BadRequest("\"shape\" " + shapeIt->dump(-1, ' ', false, json::error_handler_t::replace) + " is not a list of positive integers");
    shape.push_back(d.get<std::int64_t>());
  }
  const auto data = in.find("data");
  if (data == in.end()) throw BadRequest("\"inputs\"[0] has no \"data\"");
  std::vector<float> values;
  const std::vector<std::int64_t> dataShape = shapeAlongFirst(*data);
  if (dataShape.size() > kMaxRowDims) throw BadRequest("\"data\" is nested deeper than " + std::to_string(kMaxRowDims) + " arrays");
  flatten(*data, 0, dataShape, values, "\"data\"");
  if (static_cast<std::int64_t>(values.size()) != product(shape))
    throw BadRequest("\"data\" holds " + std::to_string(values.size()) + " values; \"shape\" " +
                     shapeString(shape) + " says " + std::to_string(product(shape)));
  return rowsOf(std::move(values), shape, rowShape);
}

::torch::Tensor decodeRaw(const std::string& body, const std::string& shapeHeader,
                          const std::vector<std::int64_t>& rowShape) {
  if (shapeHeader.empty())
    throw BadRequest(std::string("a raw request needs its shape in the ") + kShapeHeader + " header (\"2,1,28,28\")");
  std::vector<std::int64_t> shape;
  std::size_t at = 0;
  while (at <= shapeHeader.size()) {
    const std::size_t comma = std::min(shapeHeader.find(',', at), shapeHeader.size());
    const std::string part = shapeHeader.substr(at, comma - at);
    std::int64_t d = 0;
    std::size_t used = 0;
    try {
      d = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != part.size() || d < 1)
      throw BadRequest(std::string(kShapeHeader) + " '" + shapeHeader + "' is not a list of positive integers");
    shape.push_back(d);
    at = comma + 1;
  }
  if (product(shape) > static_cast<std::int64_t>(body.size()) ||
      static_cast<std::int64_t>(body.size()) != product(shape) * static_cast<std::int64_t>(sizeof(float)))
    throw BadRequest("the body has " + std::to_string(body.size()) + " bytes; shape " + shapeString(shape) +
                     " of float32 takes " + std::to_string(product(shape) * 4));
  std::vector<float> values(body.size() / sizeof(float));
  std::memcpy(values.data(), body.data(), body.size());
  return rowsOf(std::move(values), shape, rowShape);
}

std::string encodeV1(const ::torch::Tensor& output) {
  const ::torch::Tensor t = contiguousFloat(output);
  return json{{"predictions", nested(t.data_ptr<float>(), t.sizes().data(), t.dim())}}.dump();
}

std::string encodeV2(const ::torch::Tensor& output, const std::string& modelName) {
  const ::torch::Tensor t = contiguousFloat(output);
  const float* p = t.data_ptr<float>();
  json out = {{"name", "output-0"},
              {"shape", t.sizes().vec()},
              {"datatype", "FP32"},
              {"data", std::vector<float>(p, p + t.numel())}};
  return json{{"model_name", modelName}, {"outputs", json::array({out})}}.dump();
}

std::string encodeRaw(const ::torch::Tensor& output) {
  const ::torch::Tensor t = contiguousFloat(output);
  return std::string(reinterpret_cast<const char*>(t.data_ptr<float>()), t.numel() * sizeof(float));
}

std::string shapeText(const ::torch::Tensor& t) {
  std::string s;
  for (const std::int64_t d : t.sizes()) s += (s.empty() ? "" : ",") + std::to_string(d);
  return s;
}

std::string errorJson(const std::string& what) {
  // Whatever bytes the message quotes from a request, the answer is valid JSON: what is not
  // UTF-8 is replaced, not thrown over.
  return json{{"error", what}}.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

}  // namespace gyre::serve
