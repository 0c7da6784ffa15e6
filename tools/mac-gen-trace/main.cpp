// mac-gen-trace: generates a seeded synthetic trace (model: docs/synthetic-traces.md)
// and writes it as a "mac-trace" v1 HDF5 file (schema: docs/file-formats.md).
//
//   mac-gen-trace --out data/golden/synth_small.h5 --tokens 600 --layers 2
//                 --q-heads 4 --kv-heads 2 --head-dim 64 --seed 1
//
// Exit status and messages: docs/cli.md (bad flags 2, a failed write 4); nothing is written
// half, and an interrupt leaves neither the output nor a temporary.
#include "mac/cli/cli.hpp"
#include "mac/io/atomic_file.hpp"
#include "mac/io/trace_io.hpp"
#include "mac/ref/synth.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

int main(int argc, char** argv) {
  using mac::cli::range;
  mac::ref::SynthParams p;
  std::string out, rope_style = "neox";
  bool no_compress = false;

  CLI::App app{"mac-gen-trace: write a seeded synthetic MAC trace (HDF5, schema mac-trace v1)"};
  app.add_option("--out", out, "output trace file (.h5); written to a temporary name, then renamed")
      ->required();
  app.add_option("--tokens", p.tokens, "positions T per layer")
      ->check(range<int64_t>(1, mac::kMaxTokens))
      ->capture_default_str();
  app.add_option("--layers", p.num_layers, "number of layers")
      ->check(range<int64_t>(1, mac::kMaxLayers))
      ->capture_default_str();
  app.add_option("--q-heads", p.num_q_heads, "query heads Hq")
      ->check(range<int64_t>(1, mac::kMaxHeads))
      ->capture_default_str();
  app.add_option("--kv-heads", p.num_kv_heads, "KV heads Hkv (Hq = G*Hkv)")
      ->check(range<int64_t>(1, mac::kMaxHeads))
      ->capture_default_str();
  app.add_option("--head-dim", p.head_dim, "head dimension D")
      ->check(mac::cli::head_dim())
      ->capture_default_str();
  app.add_option("--seed", p.seed, "random seed (printed; the only source of randomness)")
      ->capture_default_str();
  app.add_option("--rope-style", rope_style, "RoPE pairing")
      ->check(CLI::IsMember({"neox", "gptj"}))
      ->capture_default_str();
  // The synthetic model's own ranges (SynthParams::validate); a noise std up to 1e3 keeps
  // every BF16 value finite.
  constexpr double kMaxStd = 1e3;
  app.add_option("--rope-theta", p.rope_theta, "RoPE base theta")
      ->check(range(1.0, 1e12))
      ->capture_default_str();
  app.add_option("--drift", p.drift, "context random-walk step per position, relative to its scale")
      ->check(range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--jump-prob", p.jump_prob, "per-position probability of a context jump")
      ->check(range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--repeat-prob", p.repeat_prob,
                 "per-position probability of repeating an earlier query")
      ->check(range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--repeat-noise", p.repeat_noise, "per-component noise std added to a repeat")
      ->check(range(0.0, kMaxStd))
      ->capture_default_str();
  app.add_option("--noise-scale", p.noise_scale, "largest per-token query noise std")
      ->check(range(0.0, kMaxStd))
      ->capture_default_str();
  app.add_option("--head-spread", p.head_spread, "how much heads differ, in [0, 1)")
      ->check(mac::cli::range_below(0.0, 1.0))
      ->capture_default_str();
  app.add_flag("--no-compress", no_compress, "write contiguous datasets without gzip");

  if (auto rc = mac::cli::parse(app, argc, argv, "mac-gen-trace")) return *rc;

  return mac::cli::run("mac-gen-trace", [&] {
    p.rope_style = mac::ref::parse_rope_style(rope_style);
    p.validate();  // sizes checked against their limits before anything is allocated
    mac::io::check_output(out, "--out");
    const auto t0 = std::chrono::steady_clock::now();
    const mac::ref::Trace trace = mac::ref::generate_synthetic_trace(p);
    const auto t1 = std::chrono::steady_clock::now();
    mac::io::write_trace(out, trace, !no_compress,
                         {{"generator", "mac-gen-trace"}, {"git_commit", MAC_GIT_COMMIT}});
    const auto t2 = std::chrono::steady_clock::now();
    const double gen_s = std::chrono::duration<double>(t1 - t0).count();
    const double write_s = std::chrono::duration<double>(t2 - t1).count();
    std::printf("wrote %s (%llu bytes%s)\n", out.c_str(),
                static_cast<unsigned long long>(std::filesystem::file_size(out)),
                no_compress ? ", uncompressed" : ", gzip 4 + shuffle");
    std::printf(
        "  layers %lld x T %lld, Hq %lld, Hkv %lld, D %lld, softmax_scale %.9g, rope %s theta %g\n",
        static_cast<long long>(p.num_layers), static_cast<long long>(p.tokens),
        static_cast<long long>(p.num_q_heads), static_cast<long long>(p.num_kv_heads),
        static_cast<long long>(p.head_dim), trace.meta.softmax_scale, rope_style.c_str(),
        p.rope_theta);
    std::printf("  source: %s\n", trace.meta.source.c_str());
    std::printf("  generated in %.3f s, written in %.3f s\n", gen_s, write_s);
    return mac::cli::kOk;
  });
}
