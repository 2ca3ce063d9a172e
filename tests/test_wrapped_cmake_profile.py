"""wrapped_cmake.profile: the built-in backend profiles load, and a malformed profile is one
clear error naming the file and the problem."""
from __future__ import annotations

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
    assert "ascend, cuda, metax, sim" in str(e.value)


def _write(tmp_path: Path, name: str, mutate) -> Path:
    data = yaml.safe_load((BUILTIN_DIR / "cuda.yaml").read_text())
    data["name"] = name
    mutate(data)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("mutate, fragment", [
    (lambda d: d.update(compilr={}), "unknown key compilr (did you mean 'compilers'?)"),
    (lambda d: d.pop("languages"), "missing required key languages"),
    (lambda d: d.update(languages="CUDA"), "languages: expected a list of strings, got a string"),
    (lambda d: d["device"].update(language="HIP"),
     "device.language 'HIP' is not in languages [C, CXX, CUDA]"),
    (lambda d: d.update(languages=["C", "CXX", "CUDA", "Rust"]), "unknown CMake language 'Rust'"),
    (lambda d: d["device"].update(suffixes=["cu"]), "device.suffixes: 'cu' must start with '.'"),
    (lambda d: d["compilers"]["CUDA"].update(nmes=["nvcc"]), "unknown key compilers.CUDA.nmes"),
    (lambda d: d.update(standard=18), "standard: expected one of 11, 14, 17, 20, 23, got 18"),
    (lambda d: d["torch"].update(package="torch_cuda"), "torch: give exactly one of"),
    (lambda d: d["host_compiler"].update(probe=["nvcc", "-E"]), "probe must contain"),
    (lambda d: d["environment"][0].update(name="CUDA HOME"), "is not an environment variable"),
    (lambda d: d.pop("compilers"), "languages CUDA need an entry under compilers"),
])
def test_malformed_profiles_are_one_line_errors(tmp_path, mutate, fragment):
    path = _write(tmp_path, "bad", mutate)
    with pytest.raises(InputError) as e:
        parse_profile(path)
    message = str(e.value)
    assert message.startswith(str(path) + ": ") and "\n" not in message
    assert fragment in message


def test_profile_name_must_match_file_and_yaml_errors_give_the_line(tmp_path):
    path = _write(tmp_path, "other", lambda d: None)
    renamed = path.rename(tmp_path / "third.yaml")
    with pytest.raises(InputError, match="name 'other' does not match the file name 'third'"):
        parse_profile(renamed)
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: broken\nlanguages: [C, CXX\ndevice: {}\n")
    with pytest.raises(InputError) as e:
        parse_profile(broken)
    assert str(e.value).startswith(f"{broken}:") and "not valid YAML" in str(e.value)
