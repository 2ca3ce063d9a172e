"""wrapped_cmake.profile: the built-in backend profiles load, and a malformed profile is one
clear error naming the file and the problem."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from wrapped_cmake.errors import InputError
from wrapped_cmake.profile import BUILTIN_DIR, available_profiles, load_profile, parse_profile


def test_builtin_profiles_load_and_describe_their_backend():
    names = available_profiles({})
    assert set(names) >= {"cuda", "metax", "ascend", "sim"}
    cuda = load_profile("cuda", {})
    assert cuda.device_language == "CUDA" and cuda.device_suffixes == (".cu",)
    assert cuda.device_compiler.names == ("nvcc",)
    assert cuda.device_compiler.home_env == ("CUDA_HOME", "CUDA_PATH")
    assert cuda.host_compiler.variable == "CMAKE_CUDA_HOST_COMPILER"
    assert "CUDA::cudart" in cuda.libraries and cuda.torch.version_attr == "cuda"
    assert cuda.torch.device_libraries == ("c10_cuda", "torch_cuda")
    assert load_profile("metax", {}).environment[0].name == "MACA_PATH"
    ascend = load_profile("ascend", {})
    assert ascend.environment[0].required and ascend.torch.package == "torch_npu"
    sim = load_profile("sim", {})
    assert sim.languages == ("C", "CXX") and sim.torch is None
    assert sim.compilers["CXX"].env == "CXX"  # the default C++ compiler search applies


def test_a_new_backend_is_a_new_yaml(tmp_path):
    text = (BUILTIN_DIR / "sim.yaml").read_text().replace("name: sim", "name: toy")
    (tmp_path / "toy.yaml").write_text(text)
    env = {"WRAPPED_CMAKE_PROFILES": str(tmp_path)}
    assert available_profiles(env)["toy"] == tmp_path / "toy.yaml"
    assert load_profile("toy", env).name == "toy"
    assert load_profile(str(tmp_path / "toy.yaml"), {}).name == "toy"


def test_unknown_backend_lists_the_known_ones():
    with pytest.raises(InputError) as e:
        load_profile("cudda", {})
    assert "unknown backend 'cudda' (did you mean 'cuda'?)" in str(e.value)
    assert "ascend, cuda, hip, maca, metax, musa, sim" in str(e.value)


def _write(tmp_path: Path, name: str, mutate) -> Path:
    data = yaml.safe_load((BUILTIN_DIR / "cuda.yaml").read_text())
    data["name"] = name
    mutate(data)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("mutate, fragment", [
    (lambda d: d.update(compilr={}), "compilr: unknown key (did you mean 'compilers'?)"),
    (lambda d: d.pop("languages"), "missing key 'languages'"),
    (lambda d: d.update(languages="CUDA"), "languages: expected a list of one of C, CXX, CUDA"),
    (lambda d: d["device"].update(language="HIP"),
     "device.language: 'HIP' is not in languages [C, CXX, CUDA]"),
    (lambda d: d.update(languages=["C", "CXX", "CUDA", "Rust"]),
     "languages[3]: expected one of C, CXX, CUDA, HIP, OBJC, OBJCXX, Fortran, ASM, got 'Rust'"),
    (lambda d: d["device"].update(suffixes=["cu"]), "device.suffixes: 'cu' must start with '.'"),
    (lambda d: d["compilers"]["CUDA"].update(nmes=["nvcc"]),
     "compilers.CUDA.nmes: unknown key (did you mean 'names'?)"),
    (lambda d: d.update(standard=18), "standard: expected one of 11, 14, 17, 20, 23, got 18"),
    (lambda d: d["torch"].update(package="torch_cuda"), "torch: give exactly one of version_attr or package"),
    (lambda d: d["host_compiler"].update(probe=["nvcc", "-E"]),
     "host_compiler.probe: must contain {compiler} and {host}"),
    (lambda d: d["environment"][0].update(name="CUDA HOME"),
     "environment[0].name: 'CUDA HOME' is not an environment variable"),
    (lambda d: d.pop("compilers"), "languages: CUDA need an entry under compilers"),
    (lambda d: d["compilers"]["CUDA"].update(names=[], home={}),
     "compilers.CUDA: needs names (searched on PATH) or home.bin"),
    (lambda d: d["environment"][0].update(default="sdk"), "environment[0].default: expected one of compiler-home"),
    (lambda d: d.update(definitions={"A": [1]}), "definitions: expected a mapping of NAME to string"),
    (lambda d: d.update(flags={"Rust": []}), "flags: unknown CMake language 'Rust'"),
    (lambda d: d["compilers"]["CUDA"].update(env=""), "compilers.CUDA.env: expected a non-empty string"),
])
def test_malformed_profiles_are_one_line_errors(tmp_path, mutate, fragment):
    path = _write(tmp_path, "bad", mutate)
    with pytest.raises(InputError) as e:
        parse_profile(path)
    message = str(e.value)
    assert re.match(re.escape(str(path)) + r":\d+: ", message) and "\n" not in message  # file:line: key
    assert fragment in message


def test_profile_errors_name_the_yaml_line_of_the_key(tmp_path):
    path = tmp_path / "toy.yaml"
    path.write_text("name: toy\nlanguages: [C, CXX]\ndevice:\n  language: CXX\ncompilers:\n"
                    "  CXX:\n    names: [c++]\n    home:\n      bni: bin/c++\n")
    with pytest.raises(InputError) as e:
        parse_profile(path)
    assert str(e.value) == f"{path}:9: compilers.CXX.home.bni: unknown key (did you mean 'bin'?)"


def test_profile_name_must_match_file_and_yaml_errors_give_the_line(tmp_path):
    path = _write(tmp_path, "other", lambda d: None)
    renamed = path.rename(tmp_path / "third.yaml")
    with pytest.raises(InputError, match=r"third.yaml:\d+: name: 'other' does not match the file name 'third'"):
        parse_profile(renamed)
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: broken\nlanguages: [C, CXX\ndevice: {}\n")
    with pytest.raises(InputError) as e:
        parse_profile(broken)
    assert str(e.value).startswith(f"{broken}:") and "invalid YAML" in str(e.value)
