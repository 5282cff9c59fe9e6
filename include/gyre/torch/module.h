// GYRE_TORCH_MODULE(Name): libtorch's TORCH_MODULE(Name) (the holder class Name around NameImpl)
// for modules declared inside namespace gyre, where the macro's unqualified torch::nn would name
// gyre::torch::nn.
#pragma once

#include <torch/torch.h>

#define GYRE_TORCH_MODULE(Name)                                \
  class Name : public ::torch::nn::ModuleHolder<Name##Impl> {  \
   public:                                                     \
    using ::torch::nn::ModuleHolder<Name##Impl>::ModuleHolder; \
    using Impl = Name##Impl;                                   \
  }
