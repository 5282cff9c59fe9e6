// `gyre info`'s judgements (BLAS classification, libtorch's version header, --version lines,
// threads per worker, the report) from made-up evidence, and its machine probes on files the
// test writes itself: nothing here depends on what the machine has installed.
#include "info/info_probe.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "info/info_report.h"
#include "info/info_system.h"
#include "support/ranks.h"

namespace gyre::info {
namespace {

using Strings = std::vector<std::string>;

TEST(InfoBlas, SymbolsNameTheImplementation) {
  EXPECT_EQ(classifyBlas("/opt/x/libblas.so.3", Strings{"openblas_get_config"}).kind, BlasKind::kOpenBlas);
  EXPECT_EQ(classifyBlas("/opt/x/libblas.so.3", Strings{"MKL_Get_Version_String"}).kind, BlasKind::kMkl);
  EXPECT_EQ(classifyBlas("/opt/x/libblas.so.3", Strings{"bli_info_get_version_str"}).kind, BlasKind::kBlis);
  EXPECT_EQ(classifyBlas("/opt/x/libblas.so.3", Strings{"ATL_buildinfo"}).kind, BlasKind::kAtlas);
  // Symbols win over a misleading path.
  const BlasVerdict v =
      classifyBlas("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3", Strings{"openblas_get_config"});
  EXPECT_EQ(v.kind, BlasKind::kOpenBlas);
  EXPECT_FALSE(v.slow);
}

TEST(InfoBlas, DebianAlternativesPaths) {
  const BlasVerdict netlib = classifyBlas("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0", {});
  EXPECT_EQ(netlib.kind, BlasKind::kReference);
  EXPECT_TRUE(netlib.slow);
  EXPECT_NE(netlib.name.find("reference"), std::string::npos);
  EXPECT_EQ(classifyBlas("/usr/lib/aarch64-linux-gnu/blas/libblas.so.3", {}).kind, BlasKind::kReference);
  EXPECT_EQ(classifyBlas("/opt/netlib/lib/libblas.so.3", {}).kind, BlasKind::kReference);
  EXPECT_EQ(classifyBlas("/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3", {}).kind,
            BlasKind::kOpenBlas);
  EXPECT_EQ(classifyBlas("/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3", {}).kind,
            BlasKind::kOpenBlas);
  EXPECT_EQ(classifyBlas("/usr/lib/x86_64-linux-gnu/blis-pthread/libblas.so.3", {}).kind, BlasKind::kBlis);
  EXPECT_EQ(classifyBlas("/usr/lib/x86_64-linux-gnu/atlas/libblas.so.3", {}).kind, BlasKind::kAtlas);
  EXPECT_EQ(classifyBlas("/usr/lib/x86_64-linux-gnu/libmkl_rt.so", {}).kind, BlasKind::kMkl);
  // A directory merely ending in "blas" is not Debian's netlib directory.
  EXPECT_EQ(classifyBlas("/usr/lib64/libblas.so.3", {}).kind, BlasKind::kUnknown);
  EXPECT_EQ(classifyBlas("/opt/myblas/libblas.so.3", {}).kind, BlasKind::kUnknown);
  EXPECT_FALSE(classifyBlas("/usr/lib64/libblas.so.3", {}).slow);
}

TEST(InfoBlas, MissingLibraryIsSlowAndNotFound) {
  const BlasVerdict v = classifyBlas("", {});
  EXPECT_EQ(v.kind, BlasKind::kNotFound);
  EXPECT_TRUE(v.slow);
}

TEST(InfoBlas, WarningForReferenceNamesTheFixes) {
  const BlasVerdict ref = classifyBlas("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3", {});
  const Strings debian = {"/lib/x86_64-linux-gnu/libblas.so.3",
                          "/etc/alternatives/libblas.so.3-x86_64-linux-gnu",
                          "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"};
  const std::string w = blasWarning(ref, "libblas.so.3", debian, "x86_64-linux-gnu");
  EXPECT_NE(w.find("REFERENCE BLAS"), std::string::npos) << w;
  EXPECT_NE(w.find("35x"), std::string::npos) << w;
  EXPECT_NE(w.find("apt-get install libopenblas0-pthread"), std::string::npos) << w;
  EXPECT_NE(w.find("update-alternatives --config libblas.so.3-x86_64-linux-gnu"), std::string::npos) << w;
  EXPECT_NE(w.find("update-alternatives --config liblapack.so.3-x86_64-linux-gnu"), std::string::npos) << w;
  // Every line is marked, so that no part of it reads as ordinary output.
  std::size_t lines = 0, start = 0;
  for (std::size_t nl; (nl = w.find('\n', start)) != std::string::npos; start = nl + 1, ++lines)
    EXPECT_EQ(w.compare(start, 9, "WARNING: "), 0) << w.substr(start, nl - start);
  EXPECT_GE(lines, 5u);

  EXPECT_EQ(blasWarning(classifyBlas("/x/openblas-pthread/libblas.so.3", {}), "libblas.so.3", {}, "x"), "");
  const std::string missing = blasWarning(classifyBlas("", {}), "libblas.so.3", {}, "x86_64-linux-gnu");
  EXPECT_NE(missing.find("finds no libblas.so.3"), std::string::npos) << missing;
  // A BLAS libtorch links by its own name is not managed by update-alternatives.
  const std::string direct = blasWarning(ref, "libfooblas.so.1", {}, "x86_64-linux-gnu");
  EXPECT_EQ(direct.find("update-alternatives"), std::string::npos) << direct;
  // Found through LD_LIBRARY_PATH, not the alternatives: say where, not update-alternatives.
  const Strings local = {"/home/me/lib/libblas.so.3", "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"};
  const std::string elsewhere = blasWarning(ref, "libblas.so.3", local, "x86_64-linux-gnu");
  EXPECT_EQ(elsewhere.find("update-alternatives"), std::string::npos) << elsewhere;
  EXPECT_NE(elsewhere.find("/home/me/lib/libblas.so.3"), std::string::npos) << elsewhere;
  EXPECT_NE(elsewhere.find("LD_LIBRARY_PATH"), std::string::npos) << elsewhere;
}

TEST(InfoBlas, SonameFromLibtorchsNeededEntries) {
  EXPECT_EQ(blasSoname(Strings{"libc10.so", "libgomp.so.1", "libblas.so.3", "liblapack.so.3"}),
            "libblas.so.3");
  EXPECT_EQ(blasSoname(Strings{"liblapack.so.3", "libopenblas.so.0"}), "libopenblas.so.0");
  EXPECT_EQ(blasSoname(Strings{"libmkl_rt.so.2"}), "libmkl_rt.so.2");
  EXPECT_EQ(blasSoname(Strings{"libc10.so"}), "libblas.so.3");
  EXPECT_EQ(blasSoname({}), "libblas.so.3");
  EXPECT_EQ(linearAlgebraLibraries(Strings{"libc10.so", "libblas.so.3", "liblapack.so.3", "libm.so.6"}),
            (Strings{"libblas.so.3", "liblapack.so.3"}));
}

TEST(InfoTorch, VersionFromDebianHeaderWithContinuation) {
  const char* debian =
      "#pragma once\n\n/// Indicates the major version of LibTorch.\n#define TORCH_VERSION_MAJOR 1\n"
      "#define TORCH_VERSION_MINOR 13\n#define TORCH_VERSION_PATCH 0\n\n"
      "/// Indicates the version of LibTorch.\n#define TORCH_VERSION \\\n  \"1.13.0\"\n";
  EXPECT_EQ(parseTorchVersionHeader(debian), "1.13.0");
}

TEST(InfoTorch, VersionFromOtherHeaderShapes) {
  EXPECT_EQ(parseTorchVersionHeader("#define TORCH_VERSION \"2.3.1\"\r\n"), "2.3.1");
  EXPECT_EQ(parseTorchVersionHeader("#  define\tTORCH_VERSION \"2.4.0+cpu\"\n"), "2.4.0+cpu");
  // Only the numeric macros: assembled from them.
  EXPECT_EQ(parseTorchVersionHeader("#define TORCH_VERSION_MAJOR 2\n#define TORCH_VERSION_MINOR 5\n"
                                    "#define TORCH_VERSION_PATCH 10\n"),
            "2.5.10");
  // TORCH_VERSION_MAJOR is not TORCH_VERSION.
  EXPECT_EQ(parseTorchVersionHeader("#define TORCH_VERSION_MAJOR 2\n"), std::nullopt);
  EXPECT_EQ(parseTorchVersionHeader(""), std::nullopt);
  EXPECT_EQ(parseTorchVersionHeader("#define TORCH_VERSION \"\"\n"), std::nullopt);
  EXPECT_EQ(parseTorchVersionHeader("#define TORCH_VERSION_MAJOR x\n#define TORCH_VERSION_MINOR 1\n"
                                    "#define TORCH_VERSION_PATCH 0\n"),
            std::nullopt);
}

TEST(InfoTorch, CandidatePathsFollowThePrefixes) {
  EXPECT_EQ(torchHeaderCandidates(""), (Strings{"/usr/local/include/torch/csrc/api/include/torch/version.h",
                                                "/usr/include/torch/csrc/api/include/torch/version.h"}));
  const Strings h = torchHeaderCandidates("/opt/libtorch/:/usr::/usr/local");
  EXPECT_EQ(h, (Strings{"/opt/libtorch/include/torch/csrc/api/include/torch/version.h",
                        "/usr/include/torch/csrc/api/include/torch/version.h",
                        "/usr/local/include/torch/csrc/api/include/torch/version.h"}));
  EXPECT_EQ(torchLibraryCandidates("/opt/t", "x86_64-linux-gnu"),
            (Strings{"/opt/t/lib/x86_64-linux-gnu/libtorch_cpu.so", "/opt/t/lib/libtorch_cpu.so",
                     "/usr/local/lib/x86_64-linux-gnu/libtorch_cpu.so", "/usr/local/lib/libtorch_cpu.so",
                     "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so", "/usr/lib/libtorch_cpu.so"}));
  EXPECT_EQ(torchLibraryCandidates("", "").size(), 2u);
}

TEST(InfoLaunchers, VersionLineIsTheFirstNonBlankLine) {
  EXPECT_EQ(versionLine("mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/\n"),
            "mpirun (Open MPI) 4.1.4");
  EXPECT_EQ(versionLine("\n  \n\tslurm 23.02.7  \n"), "slurm 23.02.7");
  EXPECT_EQ(versionLine("OpenSSH_9.2p1 Debian-2, OpenSSL 3.0.11 19 Sep 2023"),
            "OpenSSH_9.2p1 Debian-2, OpenSSL 3.0.11 19 Sep 2023");
  EXPECT_EQ(versionLine(""), "");
  EXPECT_EQ(versionLine(std::string(500, 'v')).size(), 120u);
}

// gyre run's rule, as gyre info reports it.
TEST(InfoCores, ThreadsPerWorkerDivideTheCores) {
  EXPECT_EQ(defaultWorkerThreads(2, 1), 2);
  EXPECT_EQ(defaultWorkerThreads(2, 2), 1);
  EXPECT_EQ(defaultWorkerThreads(2, 4), 1);  // oversubscribed: still one each
  EXPECT_EQ(defaultWorkerThreads(64, 8), 8);
  EXPECT_EQ(defaultWorkerThreads(10, 3), 3);
  EXPECT_EQ(defaultWorkerThreads(0, 2), 1);
  EXPECT_EQ(exampleWorkerCounts(2), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(exampleWorkerCounts(16), (std::vector<int>{1, 2, 4, 16}));
}

// A report as a machine with the reference BLAS and no libtorch would give it.
Report referenceBlasReport() {
  Report r;
  r.version = "9.9.9";
  r.executable = "/opt/gyre/bin/gyre";
  r.launchers = {{"gyre run", "/opt/gyre/bin/gyre", "", "(this executable)"},
                 {"mpirun", "/usr/bin/mpirun", "mpirun (Open MPI) 4.1.4", ""},
                 {"srun", "", "", ""}};
  r.blas.soname = "libblas.so.3";
  r.blas.loadedPath = "/lib/x86_64-linux-gnu/libblas.so.3";
  r.blas.chain = {"/lib/x86_64-linux-gnu/libblas.so.3", "/etc/alternatives/libblas.so.3-x86_64-linux-gnu",
                  "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"};
  r.blas.verdict = classifyBlas(r.blas.chain.back(), r.blas.markers);
  r.multiarch = "x86_64-linux-gnu";
  r.cores = {8, 4};
  r.threadVariables = {{"OMP_NUM_THREADS", ""}};
  r.gyreEnv = {{"GYRE_TIMEOUT_MS", "5000"}, {"GYRE_TRANSPORT", "carrier-pigeon"}, {"GYRE_TIMEOUT", "1"}};
  return r;
}

TEST(InfoReport, TextHasEverySectionAndTheWarning) {
  const std::string text = formatReportText(referenceBlasReport());
  for (const char* part : {"gyre 9.9.9",
                           "Available transports:",
                           "[X] tcp",
                           "[X] shm",
                           "[ ] mpi",
                           "Available launchers:",
                           "[X] mpirun",
                           "(mpirun (Open MPI) 4.1.4)",
                           "[ ] srun",
                           "not found in PATH",
                           "libtorch",
                           "not installed",
                           "-> /usr/lib/x86_64-linux-gnu/blas/libblas.so.3",
                           "reference BLAS (netlib)",
                           "WARNING: libblas.so.3 is the REFERENCE BLAS",
                           "online      8",
                           "usable      4",
                           "4 workers: 1 thread",
                           "1 worker: 4 threads",
                           "OMP_NUM_THREADS unset",
                           "GYRE_TIMEOUT_MS",
                           "= 5000",
                           "INVALID: GYRE_TRANSPORT='carrier-pigeon' is not one of auto|tcp|shm",
                           "GYRE_TIMEOUT=1",
                           "GYRE_SHM_RING_BYTES"})
    EXPECT_NE(text.find(part), std::string::npos) << "missing '" << part << "' in\n" << text;
}

TEST(InfoReport, JsonCarriesTheSameFacts) {
  const auto j = nlohmann::json::parse(formatReportJson(referenceBlasReport()));
  EXPECT_EQ(j["version"], "9.9.9");
  EXPECT_EQ(j["transports"]["tcp"], true);
  EXPECT_EQ(j["transports"]["mpi"], false);
  EXPECT_EQ(j["launchers"][1]["version"], "mpirun (Open MPI) 4.1.4");
  EXPECT_EQ(j["launchers"][2]["found"], false);
  EXPECT_EQ(j["libtorch"]["installed"], false);
  EXPECT_EQ(j["blas"]["kind"], "reference");
  EXPECT_EQ(j["blas"]["slow"], true);
  EXPECT_EQ(j["blas"]["path"], "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3");
  EXPECT_EQ(j["cores"]["threads_per_worker"]["2"], 2);
  EXPECT_EQ(j["unknown_gyre_variables"], nlohmann::json::array({"GYRE_TIMEOUT"}));
  bool sawTimeout = false;
  for (const auto& k : j["knobs"]) {
    if (k["name"] == "GYRE_TIMEOUT_MS") {
      sawTimeout = true;
      EXPECT_EQ(k["value"], "5000");
      EXPECT_FALSE(k.contains("error"));
    }
    if (k["name"] == "GYRE_TRANSPORT") {
      EXPECT_TRUE(k.contains("error"));
    }
  }
  EXPECT_TRUE(sawTimeout);
}

// ---- probes, on files this test makes ------------------------------------------------------

TEST(InfoSystem, SymlinkChainFollowsRelativeAndAbsoluteLinks) {
  test::TempDir dir;
  const std::string file = dir.path() + "/real.so.3";
  std::ofstream(file) << "x";
  ASSERT_EQ(::symlink("real.so.3", (dir.path() + "/alt").c_str()), 0);  // relative
  ASSERT_EQ(::symlink((dir.path() + "/alt").c_str(), (dir.path() + "/lib.so").c_str()), 0);
  char real[PATH_MAX];
  ASSERT_NE(::realpath(file.c_str(), real), nullptr);
  const Strings chain = symlinkChain(dir.path() + "/lib.so");
  ASSERT_EQ(chain.size(), 3u);
  EXPECT_EQ(chain[0], dir.path() + "/lib.so");
  EXPECT_EQ(chain[1], dir.path() + "/alt");
  EXPECT_EQ(chain[2], real);
  EXPECT_EQ(symlinkChain(file), Strings{file});
}

TEST(InfoSystem, ElfNeededReadsThisTestsOwnLibraries) {
  // This executable links libc dynamically; a text file is no ELF file.
  const Strings needed = elfNeeded("/proc/self/exe");
  EXPECT_NE(std::find(needed.begin(), needed.end(), "libc.so.6"), needed.end());
  test::TempDir dir;
  std::ofstream(dir.path() + "/text") << "not an ELF file at all, but long enough to hold a header........";
  EXPECT_TRUE(elfNeeded(dir.path() + "/text").empty());
  EXPECT_TRUE(elfNeeded(dir.path() + "/missing").empty());
}

TEST(InfoSystem, ProbeOfAMissingLibraryIsNotFound) {
  const BlasProbe probe = probeBlas("libgyre-no-such-blas.so.3");
  EXPECT_EQ(probe.verdict.kind, BlasKind::kNotFound);
  EXPECT_TRUE(probe.loadedPath.empty());
  EXPECT_FALSE(probe.loaderError.empty());
}

TEST(InfoSystem, TorchProbeReadsAHeaderUnderAPrefix) {
  test::TempDir dir;
  const std::string include = dir.path() + "/include/torch/csrc/api/include/torch";
  std::filesystem::create_directories(include);
  std::ofstream(include + "/version.h") << "#define TORCH_VERSION \"7.8.9\"\n";
  const TorchProbe probe = probeTorch(dir.path());
  EXPECT_EQ(probe.version, "7.8.9");
  EXPECT_EQ(probe.header, include + "/version.h");
}

}  // namespace
}  // namespace gyre::info
