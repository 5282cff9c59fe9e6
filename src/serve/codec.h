// What a prediction request and its answer look like on the wire, in the three shapes gyre serve
// speaks: TF-Serving's / KServe v1's JSON ({"instances": [...]} in, {"predictions": [...]} out),
// KServe v2's JSON (an "inputs" tensor with shape, datatype and data in, "outputs" the same), and
// raw float32 (application/octet-stream, the shape in the X-Gyre-Shape header, "2,1,28,28").
// Pure functions: every refusal is a BadRequest naming what is wrong.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gyre/errors.h"

namespace gyre::serve {

// A request the server cannot take: status 400 (or 415 for a content type the route does not speak).
class BadRequest : public Error {
 public:
  explicit BadRequest(const std::string& what, int status = 400) : Error(what), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

inline constexpr const char* kShapeHeader = "X-Gyre-Shape";

// Each returns the rows as a float32 tensor [n, rowShape...] (n >= 1). With rowShape empty (a
// TorchScript model) every row takes the shape the request gives it, the same for all rows;
// otherwise a row's values, however nested, must number rowShape's product and are reshaped to it.
::torch::Tensor decodeV1(const std::string& body, const std::vector<std::int64_t>& rowShape);
::torch::Tensor decodeV2(const std::string& body, const std::vector<std::int64_t>& rowShape);
::torch::Tensor decodeRaw(const std::string& body, const std::string& shapeHeader,
                          const std::vector<std::int64_t>& rowShape);

// The answers: [n, ...] rows of the output, as float32 (printed so that they read back to the
// same float32 bit for bit).
std::string encodeV1(const ::torch::Tensor& output);
std::string encodeV2(const ::torch::Tensor& output, const std::string& modelName);
std::string encodeRaw(const ::torch::Tensor& output);
std::string shapeText(const ::torch::Tensor& t);  // "2,10", for the X-Gyre-Shape header

// {"error": what}
std::string errorJson(const std::string& what);

}  // namespace gyre::serve
