#include "gyre/torch/flat_state.h"

#include <algorithm>
#include <sstream>

#include "common/check.h"
#include "gyre/errors.h"

namespace gyre::torch {
namespace {

namespace optim = ::torch::optim;

// The tensors of a per-parameter state, in a fixed order per kind (undefined where the kind has
// none yet, as Adam's max_exp_avg_sq without amsgrad), and the same state with others.
std::vector<::torch::Tensor> stateTensors(const optim::OptimizerParamState& s) {
  if (const auto* sgd = dynamic_cast<const optim::SGDParamState*>(&s)) return {sgd->momentum_buffer()};
  if (const auto* adam = dynamic_cast<const optim::AdamParamState*>(&s))
    return {adam->exp_avg(), adam->exp_avg_sq(), adam->max_exp_avg_sq()};
  if (const auto* adamw = dynamic_cast<const optim::AdamWParamState*>(&s))
    return {adamw->exp_avg(), adamw->exp_avg_sq(), adamw->max_exp_avg_sq()};
  if (const auto* adagrad = dynamic_cast<const optim::AdagradParamState*>(&s)) return {adagrad->sum()};
  if (const auto* rms = dynamic_cast<const optim::RMSpropParamState*>(&s))
    return {rms->square_avg(), rms->momentum_buffer(), rms->grad_avg()};
  GYRE_USAGE_ERROR(
      "an optimizer state that is neither SGD's, Adam's, AdamW's, Adagrad's nor RMSprop's cannot be cut into "
      "shards or put back together (ZeRO's optimizers are those)");
}

void setStateTensors(optim::OptimizerParamState& s, const std::vector<::torch::Tensor>& t) {
  if (auto* sgd = dynamic_cast<optim::SGDParamState*>(&s)) {
    sgd->momentum_buffer(t[0]);
  } else if (auto* adam = dynamic_cast<optim::AdamParamState*>(&s)) {
    adam->exp_avg(t[0]).exp_avg_sq(t[1]).max_exp_avg_sq(t[2]);
  } else if (auto* adamw = dynamic_cast<optim::AdamWParamState*>(&s)) {
    adamw->exp_avg(t[0]).exp_avg_sq(t[1]).max_exp_avg_sq(t[2]);
  } else if (auto* adagrad = dynamic_cast<optim::AdagradParamState*>(&s)) {
    adagrad->sum(t[0]);
  } else if (auto* rms = dynamic_cast<optim::RMSpropParamState*>(&s)) {
    rms->square_avg(t[0]).momentum_buffer(t[1]).grad_avg(t[2]);
  }
}

std::string keyOf(const ::torch::Tensor& t) { return c10::guts::to_string(t.unsafeGetTensorImpl()); }

void checkFits(std::size_t flats, const FlatLayout& layout, const std::vector<::torch::Tensor>& params) {
  GYRE_USAGE_CHECK(flats == layout.size(), "a shard layout of ", layout.size(), " flat tensor(s) does not fit ",
                   flats, " shard(s)");
  for (const FlatTensor& f : layout)
    for (const FlatPiece& p : f.pieces) {
      GYRE_USAGE_CHECK(p.param < params.size(), "a shard layout names parameter ", p.param, " of a model with ",
                       params.size());
      GYRE_USAGE_CHECK(p.begin >= 0 && p.length >= 0 && p.begin + p.length <= params[p.param].numel() &&
                           p.at >= 0 && p.at + p.length <= f.numel,
                       "a shard layout's piece (parameter ", p.param, ", elements ", p.begin, "+", p.length,
                       ") does not fit its parameter of ", params[p.param].numel(), " or its shard of ", f.numel);
    }
}

}  // namespace

ParamStatePtr mapParamState(const optim::OptimizerParamState& state,
                            const std::function<::torch::Tensor(const ::torch::Tensor&)>& f) {
  std::vector<::torch::Tensor> tensors = stateTensors(state);
  for (::torch::Tensor& t : tensors)
    if (t.defined()) t = f(t);
  ParamStatePtr out = state.clone();
  setStateTensors(*out, tensors);
  return out;
}

ParamStatePtr joinParamStates(const std::vector<const optim::OptimizerParamState*>& parts,
                              const std::function<::torch::Tensor(const std::vector<::torch::Tensor>&)>& f) {
  GYRE_ENFORCE(!parts.empty() && parts.front() != nullptr, "no states to join");
  std::vector<std::vector<::torch::Tensor>> each;  // [part][tensor]
  for (const optim::OptimizerParamState* p : parts) each.push_back(stateTensors(*p));
  std::vector<::torch::Tensor> joined(each.front().size());
  for (std::size_t k = 0; k < joined.size(); ++k) {
    if (!each.front()[k].defined()) continue;
    std::vector<::torch::Tensor> pieces;
    for (const std::vector<::torch::Tensor>& e : each) {
      GYRE_USAGE_CHECK(e.size() == joined.size() && e[k].defined(),
                       "the parts of a parameter's optimizer state are not of one kind");
      pieces.push_back(e[k]);
    }
    joined[k] = f(pieces);
  }
  ParamStatePtr out = parts.front()->clone();
  setStateTensors(*out, joined);
  return out;
}

std::string flatLayoutText(const FlatLayout& layout) {
  std::ostringstream out;
  for (std::size_t f = 0; f < layout.size(); ++f) {
    if (f > 0) out << '|';
    out << layout[f].numel << ':';
    for (std::size_t k = 0; k < layout[f].pieces.size(); ++k) {
      const FlatPiece& p = layout[f].pieces[k];
      out << (k > 0 ? ";" : "") << p.param << ',' << p.begin << ',' << p.at << ',' << p.length;
    }
  }
  return out.str();
}

FlatLayout parseFlatLayout(const std::string& text) {
  FlatLayout layout;
  std::istringstream in(text);
  for (std::string flat; std::getline(in, flat, '|');) {
    FlatTensor f;
    const std::size_t colon = flat.find(':');
    GYRE_USAGE_CHECK(colon != std::string::npos, "a shard layout's flat '", flat, "' has no ':'");
    std::istringstream head(flat.substr(0, colon));
    GYRE_USAGE_CHECK(head >> f.numel && f.numel >= 0, "a shard layout's flat '", flat, "' has no size");
    std::istringstream pieces(flat.substr(colon + 1));
    for (std::string piece; std::getline(pieces, piece, ';');) {
      FlatPiece p;
      char c1 = 0, c2 = 0, c3 = 0;
      std::istringstream fields(piece);
      GYRE_USAGE_CHECK(fields >> p.param >> c1 >> p.begin >> c2 >> p.at >> c3 >> p.length && c1 == ',' && c2 == ',' &&
                           c3 == ',' && fields.peek() == std::char_traits<char>::eof(),
                       "a shard layout's piece '", piece, "' is not param,begin,at,length");
      f.pieces.push_back(p);
    }
    layout.push_back(std::move(f));
  }
  return layout;
}

FlatTensor piecesOfRange(const std::vector<std::int64_t>& numels, const std::vector<std::int64_t>& offsets,
                         const std::vector<std::size_t>& indices, std::int64_t begin, std::int64_t end) {
  FlatTensor f;
  f.numel = std::max<std::int64_t>(0, end - begin);
  for (std::size_t k = 0; k < numels.size(); ++k) {
    const std::int64_t lo = std::max(begin, offsets[k]);
    const std::int64_t hi = std::min(end, offsets[k] + numels[k]);
    if (lo < hi) f.pieces.push_back({indices[k], lo - offsets[k], lo - begin, hi - lo});
  }
  return f;
}

std::unordered_map<const void*, std::size_t> parameterIndex(const std::vector<::torch::Tensor>& params) {
  std::unordered_map<const void*, std::size_t> out;
  for (std::size_t k = 0; k < params.size(); ++k) out[params[k].unsafeGetTensorImpl()] = k;
  return out;
}

std::vector<::torch::Tensor> optimizerParameters(const optim::Optimizer& optimizer) {
  std::vector<::torch::Tensor> out;
  for (const optim::OptimizerParamGroup& g : optimizer.param_groups())
    for (const ::torch::Tensor& p : g.params()) out.push_back(p);
  return out;
}

void gatherFlatStates(optim::Optimizer& optimizer, const FlatLayout& layout, const std::vector<::torch::Tensor>& params,
                      std::vector<ParamStatePtr>& whole) {
  const std::vector<::torch::Tensor> flats = optimizerParameters(optimizer);
  checkFits(flats.size(), layout, params);
  whole.resize(params.size());
  ::torch::NoGradGuard noGrad;
  for (std::size_t f = 0; f < flats.size(); ++f) {
    const auto it = optimizer.state().find(keyOf(flats[f]));
    if (it == optimizer.state().end()) continue;
    const std::vector<::torch::Tensor> from = stateTensors(*it->second);
    for (const FlatPiece& piece : layout[f].pieces) {
      ParamStatePtr& to = whole[piece.param];
      if (!to) {
        to = it->second->clone();
        std::vector<::torch::Tensor> fresh;
        for (const ::torch::Tensor& t : from)
          fresh.push_back(t.defined() ? ::torch::zeros(params[piece.param].sizes(), t.options()) : ::torch::Tensor());
        setStateTensors(*to, fresh);
      }
      const std::vector<::torch::Tensor> into = stateTensors(*to);
      for (std::size_t k = 0; k < from.size(); ++k)
        if (from[k].defined() && into[k].defined())
          into[k].view(-1).narrow(0, piece.begin, piece.length).copy_(from[k].view(-1).narrow(0, piece.at, piece.length));
    }
  }
}

void setFlatStates(optim::Optimizer& optimizer, const FlatLayout& layout, const std::vector<::torch::Tensor>& params,
                   const std::vector<ParamStatePtr>& whole) {
  const std::vector<::torch::Tensor> flats = optimizerParameters(optimizer);
  checkFits(flats.size(), layout, params);
  GYRE_USAGE_CHECK(whole.size() == params.size(), "the states of ", whole.size(), " parameters do not fit a model of ",
                   params.size());
  ::torch::NoGradGuard noGrad;
  for (std::size_t f = 0; f < flats.size(); ++f) {
    const std::vector<FlatPiece>& pieces = layout[f].pieces;
    const auto withState = std::find_if(pieces.begin(), pieces.end(), [&](const FlatPiece& p) { return whole[p.param] != nullptr; });
    if (withState == pieces.end()) continue;
    ParamStatePtr state = whole[withState->param]->clone();
    std::vector<::torch::Tensor> cut;
    for (const ::torch::Tensor& t : stateTensors(*state))
      cut.push_back(t.defined() ? ::torch::zeros({layout[f].numel}, t.options()) : ::torch::Tensor());
    for (const FlatPiece& piece : pieces) {
      GYRE_USAGE_CHECK(whole[piece.param] != nullptr, "parameter ", piece.param,
                       " has no optimizer state where the others of its shard have one");
      const std::vector<::torch::Tensor> from = stateTensors(*whole[piece.param]);
      GYRE_USAGE_CHECK(from.size() == cut.size(), "the parameters of one shard have optimizer states of two kinds");
      for (std::size_t k = 0; k < cut.size(); ++k)
        if (cut[k].defined() && from[k].defined())
          cut[k].narrow(0, piece.at, piece.length).copy_(from[k].reshape(-1).narrow(0, piece.begin, piece.length));
    }
    setStateTensors(*state, cut);
    optimizer.state()[keyOf(flats[f])] = std::move(state);
  }
}

void gatherFlatValues(const std::vector<::torch::Tensor>& flats, const FlatLayout& layout,
                      const std::vector<::torch::Tensor>& params) {
  checkFits(flats.size(), layout, params);
  ::torch::NoGradGuard noGrad;
  for (std::size_t f = 0; f < flats.size(); ++f)
    for (const FlatPiece& p : layout[f].pieces)
      params[p.param].view(-1).narrow(0, p.begin, p.length).copy_(flats[f].view(-1).narrow(0, p.at, p.length));
}

void setFlatValues(const std::vector<::torch::Tensor>& flats, const FlatLayout& layout,
                   const std::vector<::torch::Tensor>& params) {
  checkFits(flats.size(), layout, params);
  ::torch::NoGradGuard noGrad;
  for (std::size_t f = 0; f < flats.size(); ++f)
    for (const FlatPiece& p : layout[f].pieces)
      flats[f].view(-1).narrow(0, p.at, p.length).copy_(params[p.param].reshape(-1).narrow(0, p.begin, p.length));
}

}  // namespace gyre::torch
