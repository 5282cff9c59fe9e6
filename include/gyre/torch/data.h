// gyre::data: the data pipeline of the libtorch part, which `gyre train` uses too. Five pieces,
// each usable alone (docs/data.md):
//
//   - readIdxFile: the IDX format of MNIST-like data sets, gzip-compressed or plain;
//   - loadMnist, loadFashionMnist: one split as normalised float images and int64 labels,
//     optionally kept in a process-wide cache of decoded sets;
//   - loadImageFolder: a folder of PNG or JPEG images, one folder per class, decoded in parallel;
//   - DistributedBatchSampler: this rank's batches of sample indices for an epoch, built on
//     gyre::torch::DistributedSampler (seeded, shuffled per epoch, disjoint shards);
//   - Loader: assembles an epoch's batches on background threads, a bounded number ahead, and
//     hands them out in order, measuring how long the training loop waited for them.
//
//   auto train = gyre::data::loadFashionMnist("", "train");            // Debian's directory
//   gyre::data::DistributedBatchSampler sampler(train.size(), comm->size(), comm->rank(), 64, {.seed = 0});
//   for (int epoch = 0; epoch < epochs; ++epoch) {
//     sampler.setEpoch(epoch);
//     gyre::data::Loader loader(train, sampler);                        // 1 thread, 2 batches ahead
//     while (gyre::data::Batch batch = loader.next()) {
//       opt.zeroGrad();
//       torch::nn::functional::cross_entropy(model->forward(batch.images), batch.labels).backward();
//       opt.step();
//     }
//     // loader.waitSeconds(): the epoch's time spent waiting for data
//   }
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gyre/torch/sampler.h"

namespace gyre::data {

// ---------------------------------------------------------------------------------------------
// IDX files

// The contents of one IDX file (gzip-compressed or not: zlib reads both): its dimensions and its
// bytes.
struct IdxArray {
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> data;
};

// Reads `path`, checks the magic number (unsigned bytes, `rank` dimensions) and that the data is
// complete, with nothing after it. Throws gyre::Error naming the file when it cannot be opened or
// read (a damaged gzip stream included), is not an IDX file of that kind, is truncated or has
// trailing bytes.
IdxArray readIdxFile(const std::string& path, int rank);

// ---------------------------------------------------------------------------------------------
// Data sets

// Images [N, C, H, W] float32, normalised as (x / 255 - mean) / std, and labels [N] int64 (the
// MNIST sets: [N, 1, 28, 28] and 0..9). The tensors are CPU tensors; copying a Dataset copies
// handles, not the data.
struct Dataset {
  ::torch::Tensor images;
  ::torch::Tensor labels;
  std::int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// Debian's dataset-fashion-mnist package installs Fashion-MNIST here. MNIST has no Debian
// package, hence no default directory.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// The training sets' mean and standard deviation of the pixels scaled to [0, 1].
inline constexpr double kFashionMnistMean = 0.2860;
inline constexpr double kFashionMnistStd = 0.3530;
inline constexpr double kMnistMean = 0.1307;
inline constexpr double kMnistStd = 0.3081;

struct DatasetOptions {
  // Keep the decoded split in a process-wide cache, keyed by the files' canonical paths, sizes
  // and modification times and the normalisation: a later load with cache = true (a restarted
  // training loop in the same process, an evaluation) returns the same tensors without reading
  // the files again. The cached tensors are shared with every caller: do not modify them in
  // place (clone() first). clearCache() frees them.
  bool cache = false;
};

// One split ("train" or "t10k") from `dir`, which holds SPLIT-images-idx3-ubyte and
// SPLIT-labels-idx1-ubyte, each gzip-compressed (NAME.gz, preferred when both are there) or not.
// Throws gyre::Error when the directory or a file is missing (for Fashion-MNIST, naming Debian's
// dataset-fashion-mnist package), and when a file is unreadable, not an IDX file of the expected
// kind, truncated, not of 28x28 images, holds a label outside 0..9 or disagrees with its partner
// (naming the file).
// loadFashionMnist: `dir` empty means kFashionMnistDir; normalised with the Fashion-MNIST figures.
Dataset loadFashionMnist(const std::string& dir, const std::string& split, DatasetOptions options = {});
// loadMnist: `dir` is required (InvalidArgument when empty); normalised with the MNIST figures.
Dataset loadMnist(const std::string& dir, const std::string& split, DatasetOptions options = {});

// Drops every cached data set (tensors still held by callers stay valid). Returns how many there
// were.
std::size_t clearCache();

// ---------------------------------------------------------------------------------------------
// Image folders

struct ImageFolderOptions {
  // Decoding threads (each reads and decodes the next image); 0: one per core.
  int threads = 0;
  // 1 (grayscale) or 3 (RGB) channels, every image converted to them; 0: the first image's.
  int channels = 0;
  // Every image resized to height x width (bilinear, as torchvision's Resize((h, w)) on a tensor),
  // so the images may have any sizes; 0 x 0: the first image's size, which every image must have.
  int height = 0;
  int width = 0;
  // Per channel, of the pixels scaled to [0, 1]: images are (x / 255 - mean) / std. Empty: the
  // set's own mean and standard deviation (give the training set's to its test set).
  std::vector<double> mean = {};
  std::vector<double> std = {};
  // Up to this many images that cannot be read or decoded, or have another size than the first,
  // are left out and listed in ImageFolder::skipped; one more is an error. 0: the first is one.
  std::int64_t skipBadRecords = 0;
};

struct ImageFolder {
  Dataset data;                      // images [N, C, H, W] float32, normalised; labels [N] int64
  std::vector<std::string> classes;  // label i is classes[i]: the class folders' names, sorted
  std::vector<std::string> files;    // image i's path (as torchvision's ImageFolder.samples)
  std::vector<double> mean, std;     // the normalisation applied, per channel
  std::vector<std::string> skipped;  // "FILE: why", for each image left out
};

// An image folder as torchvision's ImageFolder reads one (ImageNet's layout): ROOT/CLASS/NAME
// for every .png, .jpg or .jpeg (any case) in each class folder, the classes and the images of a
// class in name order; other files are ignored. PNG is decoded by libpng, JPEG by libjpeg-turbo,
// recognised by their first bytes. Every image must have the first one's width and height (or,
// with `height` and `width` every image is resized to them). Throws gyre::Error naming the folder or the file: ROOT missing
// or without class folders, a class folder without images, an image that cannot be opened, is
// truncated or corrupt (libjpeg's warnings included), or has another size (beyond
// skipBadRecords); InvalidArgument for bad options.
ImageFolder loadImageFolder(const std::string& root, const ImageFolderOptions& options = {});

// ---------------------------------------------------------------------------------------------
// Batches of indices

struct BatchSamplerOptions {
  bool shuffle = true;
  std::uint64_t seed = 0;  // the same on every rank
  // The shards: DistributedSamplerOptions::dropLast (false: pad the epoch's order by repeating
  // its first samples so every rank gets ceil(n / ranks); true: every rank gets floor(n / ranks)).
  bool dropLast = false;
  // The last batch of a shard, when the batch size does not divide it: true (the default, as
  // `gyre train` does) drops it, so every batch is full; false keeps it, shorter than the others
  // (the same length on every rank, since every rank's shard is as long).
  bool dropLastBatch = true;
};

// This rank's batches of an epoch: rank r's shard of epoch e's order (DistributedSampler's
// indices(), disjoint across ranks, the same order on every run with the same seed, another for
// every epoch), cut into consecutive batches of `batch` indices. With W ranks and batch B / W,
// batch s of every rank together are the samples of batch s of one rank with batch B.
//
// Thread-safety: none needed; a sampler is a value.
class DistributedBatchSampler {
 public:
  // Throws InvalidArgument unless 0 <= rank < ranks, datasetSize >= 0 and batch >= 1.
  DistributedBatchSampler(std::int64_t datasetSize, int ranks, int rank, std::int64_t batch,
                          BatchSamplerOptions options = {});

  void setEpoch(std::int64_t epoch) { sampler_.setEpoch(epoch); }
  std::int64_t epoch() const { return sampler_.epoch(); }
  std::int64_t batchSize() const { return batch_; }
  bool dropLastBatch() const { return options_.dropLastBatch; }
  // Batches per epoch, the same on every rank.
  std::int64_t size() const { return sampler_.steps(batch_, options_.dropLastBatch); }

  // The current epoch's batches, in order.
  std::vector<std::vector<std::int64_t>> batches() const;
  const gyre::torch::DistributedSampler& sampler() const { return sampler_; }

 private:
  std::int64_t batch_;
  BatchSamplerOptions options_;
  gyre::torch::DistributedSampler sampler_;
};

// ---------------------------------------------------------------------------------------------
// The loader

// One assembled batch: images.index_select(0, indices) and labels.index_select(0, indices).
// A default-constructed (empty) Batch marks the end of the epoch.
struct Batch {
  ::torch::Tensor images;
  ::torch::Tensor labels;
  std::int64_t index = -1;  // its position in the loader's list of batches, from 0
  explicit operator bool() const { return index >= 0; }
  std::int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// Batch `index` of `data`: its images and labels at `indices`, copied out (index_select). What
// the Loader does for each batch, for a loop that picks its indices one step at a time.
Batch gatherBatch(const Dataset& data, const std::vector<std::int64_t>& indices, std::int64_t index);

// ---------------------------------------------------------------------------------------------
// Sources: data sets read batch by batch

// What a Loader draws its batches from: a Dataset in memory (inMemory), or samples read and
// decoded as each batch asks for them (gyre::data::RecordSet, data_files.h), so that memory holds
// the batches in flight rather than the whole set.
//
// Thread-safety: gather() is called from several loader threads at once.
class Source {
 public:
  virtual ~Source() = default;
  virtual std::int64_t size() const = 0;
  // Batch `index`: the samples at `indices`, in order. A source that skips bad samples
  // (skipBadRecords) leaves them out, so the batch may be shorter; it throws for one beyond its
  // budget.
  virtual Batch gather(const std::vector<std::int64_t>& indices, std::int64_t index) const = 0;
  // "WHERE: why" for each bad sample skipped so far (none for a Dataset).
  virtual std::vector<std::string> skipped() const { return {}; }
};

// A Dataset as a Source (gatherBatch). Throws InvalidArgument for a data set without tensors or
// whose images and labels disagree in length.
std::shared_ptr<const Source> inMemory(Dataset data);

// ---------------------------------------------------------------------------------------------
// Transforms

// A stage applied to each assembled batch on the thread that assembled it (a Loader's worker): it
// changes batch.images (or labels) in place or replaces them. `random` is the batch's own
// generator, seeded from the loader's seed and the batch's index (applyTransforms), so a batch
// comes out the same whichever thread made it, in every run with that seed.
using Transform = std::function<void(Batch& batch, at::Generator& random)>;

// Flips each image left to right with probability p (torchvision's RandomHorizontalFlip).
// Throws InvalidArgument unless 0 <= p <= 1.
Transform randomHorizontalFlip(double p = 0.5);
// Pads each image with `padding` rows and columns of `fill` on every side, then cuts a window of
// its size at a random place (torchvision's RandomCrop(size, padding)). `fill` is in the images'
// normalised units (0: the mean pixel). Throws InvalidArgument for a negative padding.
Transform randomCrop(std::int64_t padding, double fill = 0);
// Applies `transforms` in order to batch `batch.index` with a generator seeded from (seed, index).
void applyTransforms(Batch& batch, const std::vector<Transform>& transforms, std::uint64_t seed);

struct LoaderOptions {
  // Background threads assembling batches; 0: next() assembles each batch itself, on the
  // caller's thread (then `prefetch` does not apply). With threads, next() still assembles a
  // batch itself when no thread has started it yet (they are behind), rather than wait for one.
  // On Linux the threads run under SCHED_BATCH: the caller's priority, but waking one (next()
  // making room) does not preempt the training thread.
  int workers = 1;
  // At most this many batches are ahead of the caller: batch i is started only once next() has
  // returned batch i - prefetch (so at most `prefetch` are being assembled or waiting at any
  // time, whatever `workers` is). At least 1.
  int prefetch = 2;
  // Copy each batch into page-locked memory (Tensor::pin_memory) for faster copies to a GPU.
  // Needs a libtorch with CUDA: InvalidArgument otherwise (Debian's libtorch is CPU-only).
  bool pin = false;
  // Testing and instrumentation: called with a batch's index on the thread that assembles it, just
  // before it does (with several workers, on several threads at once). An exception it throws is
  // that batch's error.
  std::function<void(std::int64_t)> onAssemble = nullptr;
  // Applied to every batch as it is assembled (applyTransforms with `seed`): set another seed for
  // every epoch, or each epoch repeats the last one's augmentations.
  std::vector<Transform> transforms = {};
  std::uint64_t seed = 0;
};

// Hands out `batches` of `data` in order: batch i holds data's images and labels at batches[i].
// With workers >= 1 the batches are assembled on that many threads, at most `prefetch` ahead
// (LoaderOptions); whatever the threads, next() returns batch 0, 1, 2, ... in order, with the
// same contents as workers = 0 would. An index outside the data set, or any other error while
// assembling batch i, is thrown by the next() that would have returned batch i (the batches
// before it are returned first); every later next() throws it again.
//
// The destructor stops the threads (a batch being assembled is finished, no more are started)
// and joins them: destroying a loader mid-epoch returns promptly.
//
// Thread-safety: next(), waitSeconds() and lastWaitSeconds() are for one thread at a time (the
// training loop); the background threads are the loader's own. The data set's tensors are only
// read, never written: do not modify them in place while a loader uses them.
class Loader {
 public:
  // Throws InvalidArgument for workers < 0, prefetch < 1, a `pin` without CUDA, or a data set
  // whose images and labels disagree in length.
  Loader(Dataset data, std::vector<std::vector<std::int64_t>> batches, LoaderOptions options = {});
  // Batches read from `source` (the same order and guarantees; a batch's error is gather()'s).
  Loader(std::shared_ptr<const Source> source, std::vector<std::vector<std::int64_t>> batches,
         LoaderOptions options = {});
  Loader(std::shared_ptr<const Source> source, const DistributedBatchSampler& sampler, LoaderOptions options = {});
  // The sampler's batches of its current epoch.
  Loader(Dataset data, const DistributedBatchSampler& sampler, LoaderOptions options = {});
  ~Loader();
  // A moved-from loader may only be destroyed or assigned to.
  Loader(Loader&&) noexcept;
  Loader& operator=(Loader&&) noexcept;
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch in order, waiting for it if it is not ready; an empty Batch after the last.
  Batch next();
  // Batches in all, and returned so far.
  std::int64_t size() const;
  std::int64_t returned() const;
  // Seconds next() spent waiting for a batch (with workers = 0: assembling it): in all since
  // construction, and in the last call.
  double waitSeconds() const;
  double lastWaitSeconds() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gyre::data
