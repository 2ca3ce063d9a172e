"""Vendor profiles: the shipped ones load; every value that reaches generated code is validated,
and a bad one is one line naming the file and the key."""
from __future__ import annotations

import copy
import os
import re

import pytest
import yaml

from tdev.scaffold import validate
from tdev.scaffold.profiles import ProfileError, available_vendors, load_profile, vendors_dir


def test_shipped_vendors_load_with_their_real_runtime_names():
    assert set(available_vendors()) >= {"sim", "cuda", "metax", "ascend"}
    metax = load_profile("metax")
    assert metax.runtime.header == "mcr/mc_runtime.h" and metax.runtime.library == "mcruntime"
    assert metax.sdk.env == ("MACA_PATH",)
    assert {metax.runtime.calls[op].fn for op in ("malloc", "memcpy", "stream_create",
                                                  "event_elapsed")} == {
        "mcMalloc", "mcMemcpy", "mcStreamCreate", "mcEventElapsedTime"}
    ascend = load_profile("ascend")
    assert "ASCEND_HOME" in ascend.sdk.env and ascend.runtime.header == "acl/acl.h"
    memcpy = ascend.runtime.calls["memcpy"]
    assert memcpy.fn == "aclrtMemcpy"  # destination size right after the destination
    assert memcpy.args[:2] == ("hal_arg<void*>(dst)", "hal_arg<size_t>(dst_size)")
    query = ascend.runtime.calls["stream_query"]
    assert query.fn == "aclrtStreamQuery" and "&out_status" in query.args
    assert query.complete == "ACL_STREAM_STATUS_COMPLETE"
    assert ascend.runtime.init[0].fn == "aclInit"
    cuda = load_profile("cuda")
    assert (cuda.compile.kernels, cuda.compile.triton_backend, cuda.compile.triton_target) == (
        "triton", "nvidia", "cuda")
    assert cuda.sdk.env[0] == "CUDA_HOME" and cuda.runtime.not_ready == "cudaErrorNotReady"
    assert cuda.vendor_kernels.dispatch_key == "CUDA" and cuda.vendor_kernels.outputs == "adopt"
    assert cuda.vendor_kernels.fallback == "vendor" and "add.Tensor" in cuda.vendor_kernels.unboxed
    assert load_profile("metax").vendor_kernels.fallback == "cpu"  # the default
    assert load_profile("sim").sdk.simulator


def test_unboxed_operators_exist_and_return_what_the_unboxed_kernels_handle():
    """Each operator of a shipped profile's vendor_kernels.unboxed is one of torch's, and its
    schema is one Unboxed.cpp can call: it returns a Tensor, self, nothing (the in-place
    _foreach_ ops), a Tensor list or a tuple of Tensors, and takes no Tensor?[] (Tensor[] is
    fine, as a list or as cat's ITensorListRef)."""
    import torch
    checked = 0
    for vendor in available_vendors():
        vk = load_profile(vendor).vendor_kernels
        for op in (vk.unboxed + vk.direct if vk else ()):
            name, _, overload = op.partition(".")
            schema = getattr(getattr(torch.ops.aten, name), overload or "default")._schema
            rets = [str(r.type) for r in schema.returns]
            in_place = bool(rets) and schema.returns[0].alias_info is not None
            assert (rets == [] or rets == ["List[Tensor]"] or set(rets) == {"Tensor"}), (op, rets)
            assert not in_place or (len(rets) == 1 and schema.arguments[0].alias_info), op
            args = {str(a.type) for a in schema.arguments}
            assert "List[Optional[Tensor]]" not in args, op  # Tensor?[]: boxed only
            assert "Optional[Generator]" not in args, op  # random: the device's generators
            checked += 1
    assert checked >= 30  # cuda's list: AdamW's foreach kernels, layer norm, the loss, ...


def test_presized_operators_name_their_out_overloads():
    """vendor_kernels.presized maps an operator returning one Tensor to its out= overload: the
    same arguments, then the one out argument (Unboxed.cpp passes the device's result there)."""
    import torch
    checked = 0
    for vendor in available_vendors():
        vk = load_profile(vendor).vendor_kernels
        for op, out in (vk.presized.items() if vk else ()):
            schemas = []
            for name in (op, out):
                base, _, overload = name.partition(".")
                schemas.append(getattr(getattr(torch.ops.aten, base), overload or "default")._schema)
            functional, out_schema = schemas
            assert [str(r.type) for r in functional.returns] == ["Tensor"], op
            outs = [a for a in out_schema.arguments if a.is_out]
            assert len(outs) == 1, out
            assert [a.name for a in out_schema.arguments if not a.is_out] == \
                [a.name for a in functional.arguments], (op, out)
            checked += 1
    assert checked >= 6  # cuda's and sim's matmuls


def test_defaults_are_merged_under_each_profile():
    sim, cuda = load_profile("sim"), load_profile("cuda")
    assert sim.amp.dtype == "bfloat16" and cuda.amp.dtype == "float16"  # sim overrides
    assert "mm" in sim.amp.lower_precision_fp and sim.amp.fp32 == cuda.amp.fp32
    assert ("mm", "flaggems") in sim.routing


@pytest.fixture
def base():
    return yaml.safe_load((vendors_dir() / "sim.yaml").read_text())


def write(tmp_path, data) -> str:
    path = tmp_path / "chip.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def mutate(data, key: str, value):
    d = copy.deepcopy(data)
    parts = key.split(".")
    node = d
    for p in parts[:-1]:
        node = node[p]
    if value is KeyError:
        del node[parts[-1]]
    else:
        node[parts[-1]] = value
    return d


BAD = [
    ("package", "torch_x; import os", "package", "not a Python package name"),
    ("package", "os", "package", "shadow"),
    ("device", "cuda", "device", "torch's own device types"),
    ("device", "dev2", "device", "not a device name"),
    ("description", "fine */ int evil();", "description", "'*/' is not allowed"),
    ("description", 'a "quoted" word', "description", "is not allowed"),
    ("runtime.header", "../../etc/passwd.h", "runtime.header", "not a relative header path"),
    ("runtime.header", 'x.h>\n#include "y.h', "runtime.header", "not a relative header path"),
    ("runtime.library", "simrt -lbad", "runtime.library", "not a library name"),
    ("runtime.stream_type", "undeclared_t", "runtime.stream_type", "not declared"),
    ("runtime.status.success", "simSucess", "runtime.status.success", "not a constant declared"),
    ("runtime.calls.malloc.fn", "simMalloc(0);system", "runtime.calls.malloc.fn",
     "not a C identifier"),
    ("runtime.calls.malloc.fn", "simMallocc", "runtime.calls.malloc.fn", "not declared"),
    ("runtime.calls.malloc.args", ["out_ptr", "size"], "runtime.calls.malloc.args",
     "takes 3 arguments, the call passes 2"),
    ("runtime.calls.malloc.args", ["out_ptr", "size", "exit(1)"], "runtime.calls.malloc.args[2]",
     "neither a placeholder of malloc"),
    ("runtime.calls.free.args", ["dst"], "runtime.calls.free.args[0]", "neither a placeholder"),
    ("runtime.calls.memcpy.args", ["dst", "dst_size", "dst", "count", "kind"],
     "runtime.calls.memcpy.args[2]", "placeholder dst used twice"),
    ("runtime.calls.malloc.args", ["nullptr", "size", "SIM_MALLOC_DEFAULT"],
     "runtime.calls.malloc.args", "malloc must pass out_ptr"),
    ("runtime.calls.device_count.args", ["size"], "runtime.calls.device_count.args[0]",
     "neither a placeholder"),
    ("runtime.calls.stream_query.complete", KeyError, "runtime.calls.stream_query",
     "needs 'complete'"),
    ("runtime.calls.event_elapsed", KeyError, "runtime.calls", "missing operation 'event_elapsed'"),
    ("runtime.calls.launch_kernel", {"fn": "simInit", "args": ["nullptr"]},
     "runtime.calls.launch_kernel", "unknown operation"),
    ("runtime.declarations.functions.simFree", "simError_t (void* ptr); int evil(",
     "runtime.declarations.functions.simFree", "expected 'RETURN (TYPE name, ...)'"),
    ("runtime.declarations.functions.simMalloc", "simError_t (int ptr, size_t size, int policy)",
     "runtime.calls.malloc.args[0]", "expected a pointer"),
    ("runtime.declarations.functions.simMalloc", "simError_t (void* p, size_t size, int policy)",
     "runtime.calls.malloc.args[0]", "a pointer to void cannot receive a value"),
    ("runtime.declarations.functions.simGetErrorString", "simError_t (simError_t error)",
     "runtime.calls.error_string.fn", "needs 'const char*'"),
    ("runtime.declarations.typedefs.simStream_t", "void*; int x", "typedefs.simStream_t",
     "not a C type"),
    ("runtime.declarations.constants.simSuccess", {"type": "simError_t", "value": "0; x"},
     "constants.simSuccess.value", "expected an integer"),
    ("vendor_kernels.dispatch_key", "XLA", "vendor_kernels.dispatch_key", "expected one of"),
    ("vendor_kernels.outputs", "adopt", "vendor_kernels.outputs", "needs pointer: device"),
    ("vendor_kernels.fallback", "gpu", "vendor_kernels.fallback", "expected one of cpu, vendor"),
    ("vendor_kernels.unboxed", ["mm", "mm>(x); evil(<"], "vendor_kernels.unboxed[1]",
     "not an operator name"),
    ("vendor_kernels.direct", ["_foreach_sqrt"], "vendor_kernels.direct",
     "direct kernels need pointer: device"),
    ("vendor_kernels.direct", ["cat"], "vendor_kernels.direct", "cat listed in unboxed too"),
    ("vendor_kernels.direct", ["x y"], "vendor_kernels.direct[0]", "not an operator name"),
    # an unboxed route presents its arguments and returns an in-place kernel's self: out=
    # overloads stay boxed (a direct kernel is given the device's own tensors: they may be listed)
    ("vendor_kernels.unboxed", ["mm", "mm.out"], "vendor_kernels.unboxed[1]",
     "mm.out: an out= overload's route stays boxed"),
    ("vendor_kernels.unboxed", ["sum.IntList_out"], "vendor_kernels.unboxed[0]",
     "out= overload"),
    ("vendor_kernels.presized", {"cat": "cat.out"}, "vendor_kernels.presized",
     "cat listed in unboxed too"),
    ("vendor_kernels.presized", {"bmm": "bmm.out; x"}, "vendor_kernels.presized.bmm[0]",
     "not an operator name"),
    ("vendor_kernels", {"dispatch_key": "CUDA", "pointer": "device", "outputs": "adopt",
                        "direct": ["mm"], "presized": {"mm": "mm.out"}},
     "vendor_kernels.presized", "mm listed in direct too"),
    ("amp.lower_precision_fp", ["mm", "mm\"); system(\""], "amp.lower_precision_fp[1]",
     "not an operator name"),
    ("routing", {"mm": "gpu"}, "routing.mm", "expected one of flaggems, vendor, cpu"),
    ("sdk.env", ["MACA_PATH; rm"], "sdk.env[0]", "not an environment variable name"),
    ("sdk.default", "/opt/x y", "sdk.default", "not an absolute path"),
    ("runtime.device_count_probe", {"library": "libnvidia-ml.so.1; rm", "init": "i", "count": "c"},
     "runtime.device_count_probe.library", "not a library name"),
    ("runtime.device_count_probe", {"library": "libm.so.6", "init": "f(); evil", "count": "c"},
     "runtime.device_count_probe.init", "not a C identifier"),
    ("runtime.device_count_probe", {"library": "libm.so.6", "init": "i", "count": "c",
                                    "visible_devices_env": "X=1"},
     "runtime.device_count_probe.visible_devices_env", "not an environment variable name"),
    ("runtime.device_count_probe", {"library": "libm.so.6", "init": "i"},
     "runtime.device_count_probe", "count"),
    ("runtime.allocation_range", {"library": "libcuda.so.1; rm", "fn": "f"},
     "runtime.allocation_range.library", "not a library name"),
    ("runtime.allocation_range", {"library": "libcuda.so.1", "fn": "f(); evil"},
     "runtime.allocation_range.fn", "not a C identifier"),
    ("compilr", "x", "compilr", "unknown key"),
    # Triton kernels name the vendor's Triton backend and target; other kernels name none
    ("compile", {"kernels": "triton"}, "compile.kernels", "need triton_backend"),
    ("compile", {"kernels": "triton", "triton_backend": "nvidia"}, "compile.kernels",
     "triton_target"),
    ("compile", {"kernels": "cpp", "triton_backend": "nvidia", "triton_target": "cuda"},
     "compile.kernels", "only they"),
    ("compile", {"kernels": "triton", "triton_backend": "nvidia; import os",
                 "triton_target": "cuda"}, "compile.triton_backend", "not a C identifier"),
    ("compile", {"kernels": "cuda"}, "compile.kernels", "expected one of"),
    # a host backend's library: a string from the list, never a list, number or a part of a name
    ("collectives", {"host": [1]}, "collectives.host", "expected one of gloo"),
    ("collectives", {"host": {"a": 1}}, "collectives.host", "expected one of gloo"),
    ("collectives", {"host": 5}, "collectives.host", "expected one of gloo"),
    ("collectives", {"host": None}, "collectives.host", "expected one of gloo"),
    ("collectives", {"host": "gl"}, "collectives.host", "expected one of gloo"),
]


def test_an_allocation_lookup_without_ipc_calls_is_refused(tmp_path, base):
    data = mutate(base, "runtime.allocation_range", {"library": "libcuda.so.1", "fn": "f"})
    for op in ("ipc_get_handle", "ipc_open_handle", "ipc_close_handle"):
        del data["runtime"]["calls"][op]
    with pytest.raises(ProfileError, match=r"chip\.yaml:\d+: runtime\.allocation_range: .*IPC"):
        load_profile(write(tmp_path, data))
    ok = mutate(base, "runtime.allocation_range", {"library": "libcuda.so.1", "fn": "f"})
    assert load_profile(write(tmp_path, ok)).runtime.allocation_range.fn == "f"


@pytest.mark.parametrize("key, value, where, problem", BAD,
                         ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_bad_values_are_refused_naming_file_and_key(tmp_path, base, key, value, where, problem):
    data = dict(base, compilr=value) if key == "compilr" else mutate(base, key, value)
    path = write(tmp_path, data)
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    message = str(e.value)
    assert "\n" not in message
    assert re.match(rf"{re.escape(path)}:\d+: ", message), message  # file and YAML line
    assert where in message and problem in message


def test_yaml_syntax_errors_name_the_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("vendor: x\ndevice: [unclosed\n")
    with pytest.raises(ProfileError, match=rf"{path}:\d+: invalid YAML"):
        load_profile(str(path))


def test_unknown_vendor_lists_the_shipped_ones():
    with pytest.raises(ProfileError, match="unknown vendor 'nvidia'.*sim"):
        load_profile("nvidia")


@pytest.mark.parametrize("value", ["const void*", "void**", "struct CUstream_st*", "unsigned int",
                                   "enum cudaMemcpyKind", "uint32_t"])
def test_c_types_accepted(value):
    assert validate.c_type(value) == value


@pytest.mark.parametrize("value", ["int (*)(void)", "char[4]", "int; int", "struct", "const",
                                   "void* name", "int*x*y", "T<int>"])
def test_c_types_refused(value):
    with pytest.raises(ValueError):
        validate.c_type(value)


def test_parameters_may_carry_names():
    assert validate.c_param("size_t destMax") == ("size_t", "destMax")
    assert validate.c_param("enum cudaMemcpyKind kind") == ("enum cudaMemcpyKind", "kind")
    assert validate.c_param("unsigned int") == ("unsigned int", None)
    assert validate.c_param("simStatus* status") == ("simStatus*", "status")


@pytest.mark.parametrize("text, problem", [
    ("vendor: x\nruntime: " + "[" * 100_000 + "]" * 100_000 + "\n", "nested deeper than"),
    ("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n"
        for i in range(9)), "expands to more than"),
])
def test_hostile_yaml_is_one_line_naming_the_file(tmp_path, capsys, text, problem):
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError, match=problem) as e:
        load_profile(str(path))
    assert str(e.value).startswith(str(path))
    from tdev.cli.main import main
    assert main(["scaffold", "--vendor", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and problem in err


def test_a_fifo_profile_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "chip.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ProfileError, match="not a regular file"):
        load_profile(str(fifo))


@pytest.mark.parametrize("old, new, message", [
    ("malloc: {fn: aclrtMalloc, args: [out_ptr, size, ACL_MEM_MALLOC_HUGE_FIRST]}",
     "malloc: {fn: aclrtMalloc, args: [out_ptr, size, ACL_MEM_MALLOC_HUGE]}",
     "runtime.calls.malloc.args[2]: 'ACL_MEM_MALLOC_HUGE' is neither a placeholder"),
    ("aclrtMalloc: aclError (void** devPtr, size_t size,",
     "aclrtMalloc: aclError (void** devPtr, size_t si;ze,",
     "runtime.declarations.functions.aclrtMalloc: parameter 2: 'size_t si;ze' is not a C type"),
    ("ops: {sum: HCCL_REDUCE_SUM,", "ops: {sum: HCCL_REDUCE_SUMX,",
     "collectives.ops.sum: 'HCCL_REDUCE_SUMX' is not a constant"),
    ("  include: include\nbuild:", "  inclde: include\nbuild:",
     "sdk.inclde: unknown key (did you mean 'include'?)"),
    ("  mm: flaggems\n  bmm", "  mm: gpu\n  bmm", "routing.mm: expected one of flaggems, vendor, cpu"),
    ("  env: [ASCEND_HOME, ASCEND_TOOLKIT_HOME,", "  env: [ASCEND_HOME, 'ASCEND TOOLKIT',",
     "sdk.env[1]: 'ASCEND TOOLKIT' is not an environment variable name"),
])
def test_errors_name_the_yaml_line_of_the_bad_value(tmp_path, old, new, message):
    text = (vendors_dir() / "ascend.yaml").read_text()
    assert text.count(old) == 1
    line = text[:text.index(old)].count("\n") + 1  # where the edit is, 1-based
    line += next(i for i, (a, b) in enumerate(zip(old.split("\n"), new.split("\n"))) if a != b)
    path = tmp_path / "chip.yaml"
    path.write_text(text.replace(old, new))
    with pytest.raises(ProfileError) as e:
        load_profile(str(path))
    assert str(e.value).startswith(f"{path}:{line}: {message}"), str(e.value)


def test_a_5000_digit_number_is_one_line_naming_the_file(tmp_path, capsys):
    path = tmp_path / "big.yaml"
    path.write_text("vendor: x\nruntime:\n  count: " + "9" * 5000 + "\n")
    from tdev.cli.main import main
    assert main(["scaffold", "--vendor", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "digits" in err and len(err) < 300


def test_ipc_calls_come_all_three_or_none(tmp_path):
    """runtime.calls.ipc_*: a handle, its opening in another process and its closing; a profile
    with only some of them is one line (the HAL would share memory it cannot release)."""
    text = (vendors_dir() / "sim.yaml").read_text()
    close = "    ipc_close_handle: {fn: simIpcCloseMemHandle, args: [ptr]}\n"
    assert text.count(close) == 1
    path = tmp_path / "chip.yaml"
    path.write_text(text.replace(close, ""))
    with pytest.raises(ProfileError) as e:
        load_profile(str(path))
    assert "runtime.calls: IPC needs ipc_get_handle, ipc_open_handle, ipc_close_handle; the " \
           "profile has only ipc_get_handle, ipc_open_handle" in str(e.value), str(e.value)
    assert "\n" not in str(e.value)
    assert "ipc_get_handle" in load_profile("sim").runtime.calls


@pytest.mark.parametrize("size, problem", [("0", "0: a struct's size in bytes, 1 to 4096"),
                                           ("5000", "5000: a struct's size in bytes, 1 to 4096")])
def test_a_struct_passed_by_value_is_declared_by_its_size(tmp_path, size, problem):
    """runtime.declarations.structs: a handle the API passes by value (an IPC handle) is declared
    with its size, so the declared header gives it a complete type; a size out of range is one
    line naming the key."""
    assert ("simIpcMemHandle_st", 64) in load_profile("sim").runtime.declarations.structs
    text = (vendors_dir() / "sim.yaml").read_text()
    entry = "      simIpcMemHandle_st: 64"
    assert text.count(entry) == 1
    path = tmp_path / "chip.yaml"
    path.write_text(text.replace(entry, f"      simIpcMemHandle_st: {size}"))
    with pytest.raises(ProfileError) as e:
        load_profile(str(path))
    assert "runtime.declarations.structs.simIpcMemHandle_st" in str(e.value), str(e.value)
    assert problem in str(e.value) and "\n" not in str(e.value), str(e.value)
