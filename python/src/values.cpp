// python/src/values.cpp: the values around the plans (MathInstruction, TileDescription, KernelSpec, KernelSource,
// CompiledKernel, the cache counters) and the module's functions (render, compile_many, packs, the cache and device
// queries, the tuning database's path and counters).
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>
#include <unistd.h>

#include <variant>

#include "bindings.hpp"
#include "gemmkit/cache.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/jit.hpp"
#include "gemmkit/packs.hpp"
#include "gemmkit/tuning.hpp"

namespace gemmkit::python {

using namespace nb::literals;
using OptInt = std::optional<int>;

namespace {

std::string tile_repr(const TileDescription& t) {
  std::string out = "TileDescription(";
  for (const auto& field : t.fields()) {
    out += (out.back() == '(' ? "" : ", ") + std::string(field.name) + "=" + field.value;
  }
  return out + ")";
}

std::string instruction_repr(const MathInstruction& i) {
  return "MathInstruction(instruction_shape=" + shape_list(i.instruction_shape) +
         ", element_a=" + std::string(to_string(i.element_a)) + ", element_b=" + std::string(to_string(i.element_b)) +
         ", element_accumulator=" + std::string(to_string(i.element_accumulator)) +
         ", opcode_class=" + std::string(to_string(i.opcode_class)) +
         ", math_operation=" + std::string(to_string(i.math_operation)) + ")";
}

// __eq__ takes any object, as Python's data model (and mypy) expect: another type is simply not equal.
template <typename Value>
bool equal_values(const Value& self, nb::handle other) {
  return nb::isinstance<Value>(other) && self == nb::cast<const Value&>(other);
}

}  // namespace

void bind_values(nb::module_& m) {
  nb::class_<MathInstruction>(
      m, "MathInstruction",
      "The instruction a configuration issues (the reference's MathInstruction): its shape, the "
      "element types it multiplies, the opcode class and the math operation.")
      .def(nb::init<>())
      .def_ro("instruction_shape", &MathInstruction::instruction_shape)
      .def_ro("element_a", &MathInstruction::element_a)
      .def_ro("element_b", &MathInstruction::element_b)
      .def_ro("element_accumulator", &MathInstruction::element_accumulator)
      .def_ro("opcode_class", &MathInstruction::opcode_class)
      .def_ro("math_operation", &MathInstruction::math_operation)
      .def("__repr__", &instruction_repr)
      .def("__eq__", &equal_values<MathInstruction>);

  nb::class_<TileDescription>(
      m, "TileDescription",
      "One kernel configuration. On SM90, threadblock_shape is the cluster's tile (as in "
      "the reference); cta_tile() is one CTA's share. str() prints the reference's block with the CTA tile "
      "added, repr() the fields (cta_tile included).")
      .def(nb::init<>())
      .def(
          "__init__",
          [](TileDescription* self, Shape3 threadblock_shape, Shape3 warp_count, int stages, Shape3 instruction_shape,
             Shape3 cluster_shape, KernelSchedule kernel_schedule, EpilogueSchedule epilogue_schedule,
             TileScheduler tile_scheduler, MathOperation math_operation) {
            new (self)
                TileDescription{threadblock_shape, warp_count,        stages,         instruction_shape, cluster_shape,
                                kernel_schedule,   epilogue_schedule, tile_scheduler, math_operation,    std::nullopt};
          },
          nb::kw_only(), "threadblock_shape"_a, "warp_count"_a = Shape3{0, 0, 0}, "stages"_a = 0,
          "instruction_shape"_a = Shape3{0, 0, 0}, "cluster_shape"_a = Shape3{1, 1, 1},
          "kernel_schedule"_a = KernelSchedule::Auto, "epilogue_schedule"_a = EpilogueSchedule::Auto,
          "tile_scheduler"_a = TileScheduler::Default, "math_operation"_a = MathOperation::MultiplyAdd)
      .def_rw("threadblock_shape", &TileDescription::threadblock_shape)
      .def_rw("warp_count", &TileDescription::warp_count)
      .def_rw("stages", &TileDescription::stages, "0 = as many as fit (SM90)")
      .def_rw("instruction_shape", &TileDescription::instruction_shape)
      .def_rw("cluster_shape", &TileDescription::cluster_shape)
      .def_rw("kernel_schedule", &TileDescription::kernel_schedule)
      .def_rw("epilogue_schedule", &TileDescription::epilogue_schedule)
      .def_rw("tile_scheduler", &TileDescription::tile_scheduler)
      .def_rw("math_operation", &TileDescription::math_operation)
      .def_prop_ro("math_instruction", &TileDescription::math_instruction,
                   "The instruction it issues (None for a configuration no plan listed or stored).")
      .def("cta_tile", &TileDescription::cta_tile)
      .def("__str__", &TileDescription::to_string)
      .def("__repr__", &tile_repr)
      .def("__eq__", &equal_values<TileDescription>)
      .def("__copy__", [](const TileDescription& t) { return t; })
      .def(
          "__deepcopy__", [](const TileDescription& t, nb::handle) { return t; }, "memo"_a);

  nb::class_<KernelSpec>(m, "KernelSpec", "Everything that determines one generated kernel (a plain value).")
      .def_ro("cc", &KernelSpec::cc)
      .def_ro("kernel_cc", &KernelSpec::kernel_cc)
      .def_ro("family", &KernelSpec::family)
      .def_ro("opclass", &KernelSpec::opclass)
      .def_ro("element_A", &KernelSpec::element_a)
      .def_ro("element_B", &KernelSpec::element_b)
      .def_ro("element_C", &KernelSpec::element_c)
      .def_ro("element_D", &KernelSpec::element_d)
      .def_ro("element_accumulator", &KernelSpec::element_accumulator)
      .def_ro("layout_A", &KernelSpec::layout_a)
      .def_ro("layout_B", &KernelSpec::layout_b)
      .def_ro("layout_C", &KernelSpec::layout_c)
      .def_ro("alignment_A", &KernelSpec::alignment_a)
      .def_ro("alignment_B", &KernelSpec::alignment_b)
      .def_ro("alignment_C", &KernelSpec::alignment_c)
      .def_prop_ro(
          "alignment_D", [](const KernelSpec& s) { return output_alignment(s.element_c, s.element_d, s.alignment_c); },
          "The vector width (elements) at which the kernel stores D.")
      .def_ro("tile_description", &KernelSpec::tile)
      .def_ro("swizzling_functor", &KernelSpec::swizzle)
      .def_ro("activation", &KernelSpec::activation)
      .def_ro("bias", &KernelSpec::bias)
      .def_ro("scale", &KernelSpec::scale)
      .def_ro("block_scaling", &KernelSpec::block_scaling)
      .def_ro("activation_at_launch", &KernelSpec::activation_at_launch,
              "Whether the kernel takes its activation at launch (one kernel for every activation)")
      .def_ro("epilogue_visitor", &KernelSpec::visitor,
              "The kernel's epilogue visitor tree (its types resolved to the plan's), or None.")
      .def_prop_ro(
          "conv_kind",
          [](const KernelSpec& s) { return s.conv ? std::optional<ConvKind>(s.conv->kind) : std::nullopt; },
          "Conv2d kernels: fprop, dgrad or wgrad; None for a GEMM.")
      .def_prop_ro(
          "iterator_algorithm", [](const KernelSpec& s) { return s.conv.value_or(ConvKernel{}).iterator_algorithm; },
          "Conv2d kernels: how the iterators walk the operands (analytic for a GEMM).")
      .def_prop_ro(
          "stride_support", [](const KernelSpec& s) { return s.conv.value_or(ConvKernel{}).stride_support; },
          "Conv2d kernels: strided, or unity for the unit-stride dgrad kernels (strided for a GEMM).")
      .def_ro("split_k_mode", &KernelSpec::split_k_mode,
              "Conv2d kernels: serial (the kernel writes D) or parallel (partial sums, then a reduction kernel).")
      .def("name", &KernelSpec::name, "The kernel's name in the reference's format.")
      .def("procedural_name", &KernelSpec::name, "Alias of name(), as the reference calls it.")
      .def("element_compute", &KernelSpec::element_compute)
      .def("arch_flag", &KernelSpec::arch_flag)
      .def("canonical", &KernelSpec::canonical)
      .def("__eq__", &equal_values<KernelSpec>)
      .def("__repr__", [](const KernelSpec& s) { return "KernelSpec(" + s.name() + ")"; });

  nb::class_<KernelSource>(m, "KernelSource", "The generated translation unit of one kernel.")
      .def_ro("kernel_name", &KernelSource::kernel_name)
      .def_ro("arch_flag", &KernelSource::arch_flag)
      .def_ro("text", &KernelSource::text)
      .def("__str__", [](const KernelSource& s) { return s.text; });

  nb::class_<CompiledKernel>(m, "CompiledKernel", "What compile() produced: the kernel and its cache entry.")
      .def_ro("kernel_name", &CompiledKernel::kernel_name)
      .def_ro("module_path", &CompiledKernel::module_path)
      .def_ro("cache_key", &CompiledKernel::cache_key)
      .def_ro("cache_hit", &CompiledKernel::cache_hit)
      .def_ro("build_seconds", &CompiledKernel::build_seconds)
      .def("__repr__", [](const CompiledKernel& k) {
        return "CompiledKernel(" + k.kernel_name + ", cache_hit=" + (k.cache_hit ? "True" : "False") + ")";
      });

  nb::class_<CacheCounters>(m, "CacheCounters", "Process-wide cache counters (tell a hit from a build).")
      .def_ro("builds", &CacheCounters::builds)
      .def_ro("disk_hits", &CacheCounters::disk_hits)
      .def_ro("rebuilt_damaged", &CacheCounters::rebuilt_damaged)
      .def_ro("background_builds", &CacheCounters::background_builds)
      .def_ro("pack_hits", &CacheCounters::pack_hits);
}

void bind_functions(nb::module_& m) {
  m.def("render", &render, "spec"_a, "The kernel source for a spec (pure; no I/O).");
  m.def(
      "compile_many",
      [](const std::variant<std::string, std::vector<KernelSpec>>& what, nb::object progress) {
        const std::vector<KernelSpec> specs = std::holds_alternative<std::string>(what)
                                                  ? pack_specs(std::get<std::string>(what))
                                                  : std::get<std::vector<KernelSpec>>(what);
        ProgressCallback report;
        if (progress.is_none()) {
          if (::isatty(STDERR_FILENO)) report = progress_printer(ProgressStyle::Bar);  // quiet when not interactive
        } else if (PyCallable_Check(progress.ptr())) {
          report = [progress](const BuildProgress& p) {
            nb::gil_scoped_acquire gil;
            progress(p.done, p.total, p.kernel_name, p.finished, p.eta_seconds);
          };
        } else if (nb::cast<bool>(progress)) {
          report = progress_printer(default_progress_style());
        }
        nb::gil_scoped_release release;
        return compile_many(specs, report);
      },
      "specs"_a, "progress"_a = nb::none(),
      "Builds (or finds) every spec's module in the kernel cache, in parallel. `specs` is a list of KernelSpec or "
      "a pack name ('defaults'). progress: None shows a bar on stderr when it is a terminal; False is quiet; True "
      "shows a bar or, off a terminal, one line per kernel; a callable gets (done, total, kernel_name, finished, "
      "eta_seconds) for each build that starts or finishes.");
  m.def("wait_for_background_compiles", &wait_for_background_compiles, nb::call_guard<nb::gil_scoped_release>(),
        "Blocks until every kernel that run() chose to compile in the background is built (or failed).");
  m.def("pack_specs", &pack_specs, "name"_a, "The kernels of a named pack ('defaults'); no GPU needed.");
  m.def("read_pack_file", &read_pack_file, "path"_a,
        "The kernels of a pack file: one plan per line, as gemmkit compile's options (e.g. --cc 90 --element bf16).");
  m.def("cache_counters", &cache_counters);
  m.def("cache_dir", &DiskCache::default_root, "The kernel cache folder (GEMMKIT_CACHE_DIR, else per user).");
  m.def("pack_dirs", &DiskCache::pack_roots,
        "The kernel packs searched after the cache, in order: GEMMKIT_PACK_PATH's folders, then the packs installed "
        "beside the library (gemmkit/packs/*). Read only.");
  m.def("cuda_device_count", &cuda_device_count, "Visible CUDA devices; 0 without a GPU or driver.");
  m.def("tuning_database_path", &tuning::Database::default_path,
        "The tuning database (GEMMKIT_TUNING_DB, else <cache>/tuning.sqlite3; '' when it is off).");
  m.def(
      "tuning_counters",
      [] {
        const tuning::Counters c = tuning::counters();
        return std::make_pair(c.applied, c.not_built);
      },
      "(applied, not_built): how often run() used a tuning-database entry, and skipped one whose kernel is not "
      "built, in this process.");
  m.def(
      "device_cc", [](OptInt device) { return device_info(device ? *device : current_device()).cc; },
      "device"_a = nb::none(), "The compute capability (e.g. 90) of a device, by default the current one.");
  m.def("parse_data_type", &parse_enum<DataType>, "text"_a);
  m.def("parse_layout", &parse_enum<Layout>, "text"_a);
  m.def("parse_opclass", &parse_enum<OpClass>, "text"_a);
}

}  // namespace gemmkit::python
