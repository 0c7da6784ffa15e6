// mac-gen-trace: generates a seeded synthetic trace (model: docs/synthetic-traces.md)
// and writes it as a "mac-trace" v1 HDF5 file (schema: docs/file-formats.md).
//
//   mac-gen-trace --out data/golden/synth_small.h5 --tokens 600 --layers 2
//                 --q-heads 4 --kv-heads 2 --head-dim 64 --seed 1
//
// Unknown flags and bad values are errors (exit 2); nothing is written half.
#include "mac/io/trace_io.hpp"
#include "mac/ref/synth.hpp"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

int main(int argc, char** argv) {
  mac::ref::SynthParams p;
  std::string out, rope_style = "neox";
  bool no_compress = false;

  CLI::App app{"mac-gen-trace: write a seeded synthetic MAC trace (HDF5, schema mac-trace v1)"};
  app.add_option("--out", out, "output trace file (.h5); written to a temporary name, then renamed")
      ->required();
  app.add_option("--tokens", p.tokens, "positions T per layer")->capture_default_str();
  app.add_option("--layers", p.num_layers, "number of layers")->capture_default_str();
  app.add_option("--q-heads", p.num_q_heads, "query heads Hq")->capture_default_str();
  app.add_option("--kv-heads", p.num_kv_heads, "KV heads Hkv (Hq = G*Hkv)")->capture_default_str();
  app.add_option("--head-dim", p.head_dim, "head dimension D (64, 128, 256)")
      ->capture_default_str();
  app.add_option("--seed", p.seed, "random seed (printed; the only source of randomness)")
      ->capture_default_str();
  app.add_option("--rope-style", rope_style, "RoPE pairing")
      ->check(CLI::IsMember({"neox", "gptj"}))
      ->capture_default_str();
  app.add_option("--rope-theta", p.rope_theta, "RoPE base theta")->capture_default_str();
  app.add_option("--drift", p.drift, "context random-walk step per position, relative to its scale")
      ->capture_default_str();
  app.add_option("--jump-prob", p.jump_prob, "per-position probability of a context jump")
      ->capture_default_str();
  app.add_option("--repeat-prob", p.repeat_prob,
                 "per-position probability of repeating an earlier query")
      ->capture_default_str();
  app.add_option("--repeat-noise", p.repeat_noise, "per-component noise std added to a repeat")
      ->capture_default_str();
  app.add_option("--noise-scale", p.noise_scale, "largest per-token query noise std")
      ->capture_default_str();
  app.add_option("--head-spread", p.head_spread, "how much heads differ, in [0, 1)")
      ->capture_default_str();
  app.add_flag("--no-compress", no_compress, "write contiguous datasets without gzip");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    p.rope_style = mac::ref::parse_rope_style(rope_style);
    p.validate();
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
  } catch (const mac::InputError& e) {
    std::fprintf(stderr, "mac-gen-trace: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
