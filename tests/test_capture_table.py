"""tools/capture_table.py: pure functions on inline sources, and facts the shipped JSON must hold.

The pure-function tests build tiny synthetic model folders in memory; the data tests read
eagle3_nb/engines/{sglang,vllm}/data/capture.json (no git repository needed).
"""

import importlib.util
import json
import sys
import textwrap
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOL = REPO / "tools" / "capture_table.py"
ENGINES = REPO / "eagle3_nb" / "engines"

_spec = importlib.util.spec_from_file_location("capture_table", TOOL)
ct = importlib.util.module_from_spec(_spec)
sys.modules["capture_table"] = ct
_spec.loader.exec_module(ct)

SGLANG = ct.ENGINES["sglang"]
VLLM = ct.ENGINES["vllm"]
SG = "python/sglang/srt/models/"
VL = "vllm/model_executor/models/"


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def hook(source: str) -> "ct.Hook":
    """The first class's hook (or inner hook) in a module source."""
    info = ct.summarize_module(src(source), "m", SGLANG.hook, SGLANG.capture_attr)
    cls = next(iter(info.classes.values()))
    return cls.hook


def vllm_hook(source: str) -> "ct.Hook":
    info = ct.summarize_module(src(source), "m", VLLM.hook, VLLM.capture_attr)
    return next(iter(info.classes.values())).hook


def sglang_verdicts(files: dict[str, str]) -> dict:
    tree = ct.tree_from_sources({SG + k: src(v) for k, v in files.items()}, SGLANG)
    return ct.analyze_tree(SGLANG, tree)


def vllm_verdicts(files: dict[str, str], registry: str, interface_required: bool = True) -> dict:
    sources = {VL + k: src(v) for k, v in files.items()}
    sources[VL + "registry.py"] = src(registry)
    tree = ct.tree_from_sources(sources, VLLM, src(registry))
    return ct.analyze_tree(VLLM, tree, src(registry), interface_required)


# ---------------------------------------------------------------- SGLang hook shapes

PLUS_ONE = """
class A:
    def set_eagle3_layers_to_capture(self, layer_ids=None):
        if not self.pp_group.is_last_rank:
            return
        if layer_ids is None:
            num_layers = self.config.num_hidden_layers
            self.model.layers_to_capture = [2, num_layers // 2, num_layers - 3]
        else:
            self.model.layers_to_capture = [val + 1 for val in layer_ids]
"""

FIRST_IS_1 = """
class A:
    def set_eagle3_layers_to_capture(self, layer_ids=None):
        if layer_ids is None:
            self.model.layers_to_capture = [2, 3, 4]
        else:
            if layer_ids and layer_ids[0] == 1:
                self.model.layers_to_capture = [val + 1 for val in layer_ids]
            else:
                self.model.layers_to_capture = list(layer_ids)
"""

MAX_IS_L = """
class A:
    def set_eagle3_layers_to_capture(self, layer_ids=None):
        num_layers = self.config.num_hidden_layers
        if layer_ids is None:
            self.model.layers_to_capture = [2, num_layers // 2, num_layers - 3]
        elif layer_ids and max(layer_ids) == num_layers:
            self.model.layers_to_capture = list(layer_ids)
        else:
            self.model.layers_to_capture = [val + 1 for val in layer_ids]
"""

AS_IS = """
class A:
    def set_eagle3_layers_to_capture(self, layers_to_capture):
        self.layers_to_capture = layers_to_capture
"""

NO_IDS = """
class A:
    def set_eagle3_layers_to_capture(self):
        self.capture_aux_hidden_states = True
        num_layers = self.config.num_hidden_layers
        self.model.layers_to_capture = [2, num_layers // 2, num_layers - 3]
"""

MINUS_ONE = """
class A:
    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.model.layers_to_capture = [val - 1 for val in layer_ids]
"""

DELEGATE_SKIP = """
class A:
    def set_eagle3_layers_to_capture(self, layer_ids=None):
        if hasattr(self.language_model, "set_eagle3_layers_to_capture"):
            self.language_model.set_eagle3_layers_to_capture(layer_ids)
"""

DELEGATE_RAISE = """
class A:
    def set_eagle3_layers_to_capture(self, layer_ids=None) -> None:
        \"\"\"Set the layers to capture.\"\"\"
        if not hasattr(self.language_model, "set_eagle3_layers_to_capture"):
            raise AttributeError("language_model does not support EAGLE3")
        self.language_model.set_eagle3_layers_to_capture(layer_ids)
"""

INNER_CALL = """
class A:
    def set_eagle3_layers_to_capture(self, layer_ids=None):
        if layer_ids is None:
            self.model.set_eagle3_layers_to_capture([2, 3, 4])
        else:
            self.model.set_eagle3_layers_to_capture([val + 1 for val in layer_ids])
"""


class SglangHookShapes(unittest.TestCase):
    def classify(self, source):
        return ct.classify_sglang_hook(hook(source))

    def test_plus_one(self):
        shape = self.classify(PLUS_ONE)
        self.assertEqual((shape.kind, shape.rule, shape.path), ("rule", "plus_one", "model"))

    def test_plus_one_if_first_is_1(self):
        self.assertEqual(self.classify(FIRST_IS_1).rule, "plus_one_if_first_is_1")

    def test_as_is_if_max_is_l(self):
        self.assertEqual(self.classify(MAX_IS_L).rule, "as_is_if_max_is_L")

    def test_as_is_store_on_self(self):
        shape = self.classify(AS_IS)
        self.assertEqual((shape.rule, shape.path), ("as_is", ""))

    def test_no_ids_is_fixed_default(self):
        self.assertEqual(self.classify(NO_IDS).rule, "fixed_default")

    def test_unrecognised_transformation_is_unknown(self):
        self.assertEqual(self.classify(MINUS_ONE).kind, "unknown")

    def test_delegation_and_its_guard(self):
        skip, raise_ = self.classify(DELEGATE_SKIP), self.classify(DELEGATE_RAISE)
        self.assertEqual((skip.kind, skip.path, skip.guard), ("delegate", "language_model", "skip"))
        self.assertEqual((raise_.kind, raise_.guard), ("delegate", "raise"))

    def test_transformed_ids_passed_to_inner_hook(self):
        shape = self.classify(INNER_CALL)
        self.assertEqual((shape.kind, shape.rule, shape.inner), ("rule", "plus_one", "model"))


# ---------------------------------------------------------------- vLLM hook shapes

class VllmHookShapes(unittest.TestCase):
    def classify(self, body: str):
        return ct.classify_vllm_hook(vllm_hook("class A:\n" + textwrap.indent(src(body), "    ")))

    def test_holder(self):
        shape = self.classify("""
            def set_aux_hidden_state_layers(self, layers):
                self.model.aux_hidden_state_layers = layers
        """)
        self.assertEqual((shape.kind, shape.path), ("holder", "model"))

    def test_holder_through_get_language_model(self):
        shape = self.classify("""
            def set_aux_hidden_state_layers(self, layers):
                self.get_language_model().model.aux_hidden_state_layers = layers
        """)
        self.assertEqual((shape.kind, shape.path), ("holder", "language_model.model"))

    def test_delegate(self):
        shape = self.classify("""
            def set_aux_hidden_state_layers(self, layers):
                self.language_model.set_aux_hidden_state_layers(layers)
        """)
        self.assertEqual((shape.kind, shape.path), ("delegate", "language_model"))

    def test_stub(self):
        shape = self.classify("""
            def set_aux_hidden_state_layers(self, layers):
                \"\"\"Protocol method.\"\"\"
                ...
        """)
        self.assertEqual(shape.kind, "stub")

    def test_transformers_recorder(self):
        shape = self.classify("""
            def set_aux_hidden_state_layers(self, layers):
                for layer in layers:
                    layer_name = self._layer_names[layer - 1]
        """)
        self.assertEqual((shape.kind, shape.rule), ("recorder", "as_is"))

    def test_shifted_ids_are_unknown(self):
        shape = self.classify("""
            def set_aux_hidden_state_layers(self, layers):
                self.model.aux_hidden_state_layers = tuple(l + 1 for l in layers)
        """)
        self.assertEqual(shape.kind, "unknown")


# ---------------------------------------------------------------- forward capture loops

class CaptureFeatures(unittest.TestCase):
    def features(self, body: str, attr: str = "aux_hidden_state_layers"):
        return ct.capture_features(src(body), attr)

    def test_before_the_layer_no_final(self):
        f = self.features("""
            def forward(self, h, r):
                aux = []
                for idx, layer in enumerate(self.layers):
                    if idx in self.aux_hidden_state_layers:
                        aux.append(h + r)
                    h, r = layer(h, r)
                return h, aux
        """)
        self.assertEqual((f["before"], f["after"], f["odd"], f["final"]), (True, False, False, False))

    def test_before_with_end_layer_check_is_final(self):
        f = self.features("""
            def forward(self, h, r):
                aux = []
                for idx in range(self.start_layer, self.end_layer):
                    with ctx:
                        if idx in self.aux_hidden_state_layers:
                            aux.append(h + r)
                        layer = self.layers[idx]
                        h, r = layer(h, r)
                if self.end_layer in self.aux_hidden_state_layers:
                    aux.append(h + r)
                return h, aux
        """)
        self.assertEqual((f["before"], f["final"]), (True, True))

    def test_after_with_plus_one_reaches_the_final_boundary(self):
        f = self.features("""
            def forward(self, h, r):
                aux = self._maybe_add_hidden_state([], 0, h, r)
                for idx, layer in enumerate(self.layers):
                    h, r = layer(h, r)
                    self._maybe_add_hidden_state(aux, idx + 1, h, r)
                return h, aux
        """)
        self.assertEqual((f["before"], f["after"], f["final"]), (False, True, True))

    def test_capture_handed_to_the_layer_counts_as_before(self):
        f = self.features("""
            def forward(self, h):
                for i in range(self.start_layer, self.end_layer):
                    layer = self.layers[i]
                    h = layer(h, capture_output=aux.capture if i in self.layers_to_capture else None)
                return h
        """, "layers_to_capture")
        self.assertEqual((f["before"], f["odd"]), (True, False))

    def test_same_index_after_the_layer_is_odd(self):
        f = self.features("""
            def forward(self, h):
                for layer_id in range(self.start_layer, self.end_layer):
                    h = self.layers[layer_id](h)
                    if layer_id in self.layers_to_capture:
                        aux.append(h)
                return h
        """, "layers_to_capture")
        self.assertTrue(f["odd"])


# ---------------------------------------------------------------- resolution on small trees

LLAMA = """
class LlamaModel:
    def forward(self, h):
        for i in range(self.start_layer, self.end_layer):
            if i in self.layers_to_capture:
                aux.append(h)
            layer = self.layers[i]
            h = layer(h)
        return h

class LlamaForCausalLM:
    def __init__(self, config):
        self.model = self._init_model(config)

    def _init_model(self, config):
        return LlamaModel(config)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        if layer_ids is None:
            self.model.layers_to_capture = [2, 3, 4]
        else:
            self.model.layers_to_capture = [val + 1 for val in layer_ids]

class Phi3ForCausalLM(LlamaForCausalLM):
    pass

EntryClass = [LlamaForCausalLM, Phi3ForCausalLM]
"""


class SglangResolution(unittest.TestCase):
    def test_inherited_hook_across_modules(self):
        verdicts = sglang_verdicts({
            "llama.py": LLAMA,
            "mistral.py": """
                from sglang.srt.models.llama import LlamaForCausalLM

                class MistralForCausalLM(LlamaForCausalLM):
                    pass

                EntryClass = MistralForCausalLM
            """,
        })
        v = verdicts["MistralForCausalLM"]
        self.assertEqual((v.status, v.rule, v.final_boundary), ("capture", "plus_one", False))
        self.assertEqual(v.hook, SG + "llama.py LlamaForCausalLM.set_eagle3_layers_to_capture")
        self.assertEqual(verdicts["Phi3ForCausalLM"].rule, "plus_one")

    def test_c3_order_prefers_the_first_base_that_defines_the_hook(self):
        verdicts = sglang_verdicts({
            "a.py": """
                class Mixin:
                    def set_eagle3_layers_to_capture(self, layer_ids=None):
                        self.model.layers_to_capture = list(layer_ids)

                class Base(Mixin):
                    pass

                class Other(Mixin):
                    def set_eagle3_layers_to_capture(self, layer_ids=None):
                        self.model.layers_to_capture = [val + 1 for val in layer_ids]

                class Served(Base, Other):
                    pass

                EntryClass = Served
            """,
        })
        # C3: Served, Base, Other, Mixin -> Other's hook, not Mixin's
        self.assertEqual(verdicts["Served"].rule, "plus_one")
        self.assertIn("Other.set_eagle3", verdicts["Served"].hook)

    def test_wrapper_delegates_to_language_model_imported_inside_init(self):
        verdicts = sglang_verdicts({
            "llama.py": LLAMA,
            "mm.py": """
                class MMForConditionalGeneration:
                    def __init__(self, config):
                        from sglang.srt.models.llama import LlamaForCausalLM
                        self.language_model = LlamaForCausalLM(config.text_config)

                    def set_eagle3_layers_to_capture(self, layer_ids=None):
                        if hasattr(self.language_model, "set_eagle3_layers_to_capture"):
                            self.language_model.set_eagle3_layers_to_capture(layer_ids)

                EntryClass = [MMForConditionalGeneration]
            """,
        })
        v = verdicts["MMForConditionalGeneration"]
        self.assertEqual((v.status, v.rule), ("capture", "plus_one"))
        self.assertEqual(v.delegate, SG + "llama.py LlamaForCausalLM.set_eagle3_layers_to_capture")

    def test_wrapper_without_hook_and_delegate_without_hook(self):
        verdicts = sglang_verdicts({
            "plain.py": """
                class PlainForCausalLM:
                    pass

                class Wrapper:
                    def __init__(self, config):
                        self.language_model = PlainForCausalLM(config)

                    def set_eagle3_layers_to_capture(self, layer_ids=None):
                        if not hasattr(self.language_model, "set_eagle3_layers_to_capture"):
                            raise AttributeError("no")
                        self.language_model.set_eagle3_layers_to_capture(layer_ids)

                class NoHook:
                    pass

                EntryClass = [Wrapper, NoHook]
            """,
        })
        self.assertEqual(verdicts["NoHook"].status, "no_capture")
        wrapper = verdicts["Wrapper"]
        self.assertEqual(wrapper.status, "no_capture")
        self.assertIn("raises AttributeError", wrapper.note)

    def test_inner_hook_and_constructor_parameter(self):
        verdicts = sglang_verdicts({
            "moe.py": """
                class MoeModel:
                    def set_eagle3_layers_to_capture(self, layers_to_capture):
                        self.layers_to_capture = layers_to_capture

                class OtherModel(MoeModel):
                    pass

                class MoeForCausalLM:
                    def __init__(self, config, model_cls=MoeModel):
                        self.model = model_cls(config)

                    def set_eagle3_layers_to_capture(self, layer_ids=None):
                        if layer_ids is None:
                            self.model.set_eagle3_layers_to_capture([1, 2, 3])
                        else:
                            self.model.set_eagle3_layers_to_capture([val + 1 for val in layer_ids])

                class Moe2ForCausalLM(MoeForCausalLM):
                    def __init__(self, config):
                        super().__init__(config, model_cls=OtherModel)

                EntryClass = [MoeForCausalLM, Moe2ForCausalLM]
            """,
        })
        first, second = verdicts["MoeForCausalLM"], verdicts["Moe2ForCausalLM"]
        self.assertEqual(first.rule, "plus_one")
        self.assertEqual(first.delegate, SG + "moe.py MoeModel.set_eagle3_layers_to_capture")
        self.assertEqual(second.rule, "plus_one")

    def test_odd_capture_loop_makes_the_rule_unknown(self):
        verdicts = sglang_verdicts({
            "odd.py": """
                class OddModel:
                    def forward(self, h):
                        for i in range(self.start_layer, self.end_layer):
                            h = self.layers[i](h)
                            if i - 1 in self.layers_to_capture:
                                aux.append(h)
                        return h

                class OddForCausalLM:
                    def __init__(self, config):
                        self.model = OddModel(config)

                    def set_eagle3_layers_to_capture(self, layer_ids=None):
                        self.model.layers_to_capture = [val + 1 for val in layer_ids]

                EntryClass = OddForCausalLM
            """,
        })
        v = verdicts["OddForCausalLM"]
        self.assertEqual((v.status, v.rule), ("capture", "unknown"))
        self.assertIn("odd.py OddModel.forward", v.note)


VLLM_INTERFACES = """
class EagleModelMixin:
    aux_hidden_state_layers = ()

    def _set_aux_hidden_state_layers(self, layers):
        self.aux_hidden_state_layers = tuple(sorted(set(layers)))

    def _maybe_add_hidden_state(self, aux, layer_idx, h, r):
        if layer_idx in self.aux_hidden_state_layers:
            aux.append(h + r)
        return aux

class SupportsEagle3:
    supports_eagle3 = True

    def set_aux_hidden_state_layers(self, layers):
        parent_ref = self
        if hasattr(self, "language_model"):
            parent_ref = self.language_model
        holder = getattr(parent_ref, "model", parent_ref)
        assert isinstance(holder, EagleModelMixin)
        holder._set_aux_hidden_state_layers(layers)
"""

VLLM_LLAMA = """
from torch import nn
from .interfaces import EagleModelMixin, SupportsEagle3

class LlamaModel(nn.Module, EagleModelMixin):
    def forward(self, h, r):
        aux = self._maybe_add_hidden_state([], 0, h, r)
        for idx, layer in enumerate(self.layers):
            h, r = layer(h, r)
            self._maybe_add_hidden_state(aux, idx + 1, h, r)
        return h, aux

class LlamaForCausalLM(nn.Module, SupportsEagle3):
    def __init__(self, *, vllm_config, prefix=""):
        self.model = LlamaModel(vllm_config=vllm_config)

class PlainModel(nn.Module):
    def forward(self, h):
        for layer in self.layers:
            h = layer(h)
        return h

class PlainForCausalLM(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        self.model = PlainModel(vllm_config=vllm_config)
"""

VLLM_MM = """
from vllm.model_executor.models.interfaces import SupportsEagle3
from .utils import init_vllm_registered_model

class FixedVL(SupportsEagle3):
    def __init__(self, *, vllm_config, prefix=""):
        with self._mark_language_model(vllm_config):
            self.language_model = init_vllm_registered_model(
                vllm_config=vllm_config, architectures=["LlamaForCausalLM"])

class AnyVL(SupportsEagle3):
    def __init__(self, *, vllm_config, prefix=""):
        self.language_model = init_vllm_registered_model(
            vllm_config=vllm_config, hf_config=config.text_config)

    def set_aux_hidden_state_layers(self, layers):
        self.language_model.set_aux_hidden_state_layers(layers)

class BrokenVL(SupportsEagle3):
    def __init__(self, *, vllm_config, prefix=""):
        self.language_model = init_vllm_registered_model(
            vllm_config=vllm_config, architectures=["PlainForCausalLM"])
"""

VLLM_REGISTRY = """
_TEXT_GENERATION_MODELS = {
    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
    "MistralForCausalLM": ("llama", "LlamaForCausalLM"),
    "PlainForCausalLM": ("llama", "PlainForCausalLM"),
}
_MULTIMODAL_MODELS = {
    "FixedVL": ("mm", "FixedVL"),
    "AnyVL": ("mm", "AnyVL"),
    "BrokenVL": ("mm", "BrokenVL"),
}
_EMBEDDING_MODELS = {
    "LlamaModel": ("llama", "LlamaForCausalLM"),
}
"""


class VllmResolution(unittest.TestCase):
    def setUp(self):
        self.v = vllm_verdicts({"interfaces.py": VLLM_INTERFACES, "llama.py": VLLM_LLAMA, "mm.py": VLLM_MM},
                               VLLM_REGISTRY)

    def test_registry_dicts_kept(self):
        self.assertEqual(set(self.v), {"LlamaForCausalLM", "MistralForCausalLM", "PlainForCausalLM",
                                       "FixedVL", "AnyVL", "BrokenVL"})

    def test_interface_default_reads_the_mixin_forward(self):
        v = self.v["MistralForCausalLM"]
        self.assertEqual((v.status, v.rule, v.final_boundary), ("capture", "as_is", True))
        self.assertEqual(v.hook, VL + "interfaces.py SupportsEagle3.set_aux_hidden_state_layers")

    def test_not_supports_eagle3(self):
        self.assertEqual(self.v["PlainForCausalLM"].status, "no_capture")

    def test_wrapper_through_registry_architecture(self):
        v = self.v["FixedVL"]
        self.assertEqual((v.status, v.rule, v.final_boundary), ("capture", "as_is", True))

    def test_wrapper_with_runtime_language_model(self):
        v = self.v["AnyVL"]
        self.assertEqual((v.status, v.rule), ("capture", "of_language_model"))
        self.assertEqual(v.delegate, "runtime: config.text_config.architectures")

    def test_interface_assert_fails_on_non_mixin_model(self):
        v = self.v["BrokenVL"]
        self.assertEqual(v.status, "no_capture")
        self.assertIn("PlainModel is not", v.note)

    def test_before_supports_eagle3_existed_the_method_is_enough(self):
        v = vllm_verdicts({"llama.py": """
            class LlamaModel:
                def forward(self, h, r):
                    for idx, layer in enumerate(self.layers[self.start_layer:self.end_layer]):
                        if idx in self.aux_hidden_state_layers:
                            aux.append(h + r)
                        h, r = layer(h, r)
                    return h

            class LlamaForCausalLM:
                def __init__(self, *, vllm_config, prefix=""):
                    self.model = LlamaModel(vllm_config=vllm_config)

                def set_aux_hidden_state_layers(self, layers):
                    self.model.aux_hidden_state_layers = layers
        """}, '_TEXT_GENERATION_MODELS = {"LlamaForCausalLM": ("llama", "LlamaForCausalLM")}\n',
            interface_required=False)["LlamaForCausalLM"]
        self.assertEqual((v.status, v.rule, v.final_boundary), ("capture", "as_is", False))


class VllmInnerSetter(unittest.TestCase):
    def test_inner_model_passing_the_ids_to_a_submodule(self):
        files = {"interfaces.py": VLLM_INTERFACES, "plamo.py": """
            from .interfaces import EagleModelMixin, SupportsEagle3

            class Decoder(EagleModelMixin):
                def forward(self, h, r):
                    aux = self._maybe_add_hidden_state([], 0, h, r)
                    for idx, layer in enumerate(self.layers):
                        h, r = layer(h, r)
                        self._maybe_add_hidden_state(aux, idx + 1, h, r)
                    return h, aux

            class PlamoModel(EagleModelMixin):
                def __init__(self, vllm_config):
                    self.layers = Decoder(vllm_config)

                def _set_aux_hidden_state_layers(self, layers):
                    self.layers._set_aux_hidden_state_layers(layers)

                def forward(self, h):
                    return self.layers(h, None)

            class PlamoForCausalLM(SupportsEagle3):
                def __init__(self, *, vllm_config, prefix=""):
                    self.model = PlamoModel(vllm_config)
        """}
        v = vllm_verdicts(files, '_TEXT_GENERATION_MODELS = {"P": ("plamo", "PlamoForCausalLM")}\n')["P"]
        self.assertEqual((v.status, v.rule, v.final_boundary), ("capture", "as_is", True))


class RegistryAndEntries(unittest.TestCase):
    def test_byte_order_mark_is_accepted(self):
        info = ct.summarize_module("\ufeffclass A:\n    pass\nEntryClass = A\n", "m", SGLANG.hook,
                                   SGLANG.capture_attr)
        self.assertIsNone(info.parse_error)
        self.assertEqual(info.entry, ["A"])

    def test_pr_numbers_from_log(self):
        out = "\0abc123\x1fSupport EAGLE3 for Qwen (#7745)\n+    def set_eagle3_layers_to_capture(self):\n"
        commit = ct._parse_patch_log(out)[0]
        self.assertEqual((commit["commit"], commit["pr"]), ("abc123", 7745))
        self.assertIn("    def set_eagle3_layers_to_capture(self):", commit["plus"])

    def test_registry_map_selects_dicts(self):
        found = ct.registry_map(src(VLLM_REGISTRY), ("_TEXT_GENERATION_MODELS",))
        self.assertEqual(found["MistralForCausalLM"],
                         ("vllm.model_executor.models.llama", "LlamaForCausalLM"))
        self.assertNotIn("FixedVL", found)
        dotted = ct.registry_map('_M = {"X": ("vllm.models.x", "X")}\n', None)
        self.assertEqual(dotted["X"], ("vllm.models.x", "X"))

    def test_entry_class_alias_uses_the_class_name(self):
        verdicts = sglang_verdicts({"a.py": """
            class RealName:
                pass

            Alias = RealName
            EntryClass = Alias
        """})
        self.assertEqual(list(verdicts), ["RealName"])


# ---------------------------------------------------------------- ranges

class Ranges(unittest.TestCase):
    def test_compress_merges_runs_and_ends_open(self):
        versions = ["0.1", "0.2", "0.3", "0.4"]
        states = [{"status": "not_served"}, {"status": "capture", "rule": "plus_one"},
                  {"status": "capture", "rule": "plus_one"}, {"status": "capture", "rule": "as_is"}]
        ranges = ct.compress_ranges(versions, states)
        self.assertEqual([(r["from"], r["until"], r["status"], r.get("rule")) for r in ranges],
                         [("0.1", "0.2", "not_served", None), ("0.2", "0.4", "capture", "plus_one"),
                          ("0.4", None, "capture", "as_is")])

    def test_a_field_that_appears_splits_a_range(self):
        ranges = ct.compress_ranges(["1", "2"], [{"status": "capture"}, {"status": "capture", "note": "x"}])
        self.assertEqual(len(ranges), 2)


# ---------------------------------------------------------------- the shipped data

def load(engine: str) -> dict:
    return json.loads((ENGINES / engine / "data" / "capture.json").read_text(encoding="utf-8"))


def state_at(table: dict, arch: str, version: str) -> dict:
    """The range of `arch` that contains release `version`."""
    order = {v: i for i, v in enumerate(table["releases"])}
    at = order[version]
    for entry in table["architectures"][arch]:
        start = order[entry["from"]]
        end = order[entry["until"]] if entry["until"] else len(order)
        if start <= at < end:
            return entry
    raise AssertionError(f"{arch} has no range for {version}")


class ShippedData(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sglang, cls.vllm = load("sglang"), load("vllm")

    def test_files_are_small(self):
        for engine in ("sglang", "vllm"):
            self.assertLess((ENGINES / engine / "data" / "capture.json").stat().st_size, 300_000)

    def test_ranges_tile_every_release(self):
        for table in (self.sglang, self.vllm):
            releases = table["releases"]
            for arch, ranges in table["architectures"].items():
                self.assertEqual(ranges[0]["from"], releases[0], arch)
                self.assertIsNone(ranges[-1]["until"], arch)
                for before, after in zip(ranges, ranges[1:]):
                    self.assertEqual(before["until"], after["from"], arch)
                for entry in ranges:
                    self.assertIn(entry["status"], ct.STATUSES)
                    if entry["status"] == "capture":
                        self.assertIn(entry["rule"], ct.RULES, arch)

    def test_families_are_kept(self):
        for arch in ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
                     "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration",
                     "GptOssForCausalLM", "Llama4ForConditionalGeneration", "MiniMaxM2ForCausalLM",
                     "Glm4MoeForCausalLM", "Qwen2_5_VLForConditionalGeneration",
                     "Qwen3VLForConditionalGeneration", "MistralForCausalLM"):
            self.assertIn(arch, self.sglang["architectures"])
            self.assertIn(arch, self.vllm["architectures"])

    def test_sglang_kimi_k25(self):
        kimi = "KimiK25ForConditionalGeneration"
        self.assertEqual(state_at(self.sglang, kimi, "0.5.4")["status"], "not_served")  # no kimi_k25.py
        self.assertEqual(state_at(self.sglang, kimi, "0.5.9")["status"], "no_capture")  # class, no hook
        ranges = self.sglang["architectures"][kimi]
        first = next(r for r in ranges if r["status"] == "capture")
        self.assertEqual(first["from"], "0.5.10")  # the first release with PR #19689
        self.assertIn(19689, [c["pr"] for c in first["added_by"]])
        self.assertTrue(first["hook"].endswith("kimi_k25.py KimiK25ForConditionalGeneration."
                                               "set_eagle3_layers_to_capture"))
        self.assertIn("deepseek_v2.py", first["delegate"])
        later = self.sglang["releases"][self.sglang["releases"].index("0.5.10"):]
        for version in later:
            self.assertEqual(state_at(self.sglang, kimi, version)["status"], "capture", version)

    def test_sglang_llama_plus_one_once_the_hook_takes_ids(self):
        releases = self.sglang["releases"]
        for version in releases:
            entry = state_at(self.sglang, "LlamaForCausalLM", version)
            self.assertEqual(entry["status"], "capture")
            # before 0.4.9 the hook takes no ids: the draft's ids are ignored (fixed default layers)
            expected = "plus_one" if releases.index(version) >= releases.index("0.4.9") else "fixed_default"
            self.assertEqual(entry["rule"], expected, version)

    def test_sglang_deepseek_v3(self):
        deepseek = "DeepseekV3ForCausalLM"
        self.assertEqual(state_at(self.sglang, deepseek, "0.4.10.post2")["status"], "no_capture")
        entry = state_at(self.sglang, deepseek, "0.5.4.post3")
        self.assertEqual(entry["status"], "capture")
        self.assertIn(12319, [c["pr"] for c in entry["added_by"]])

    def test_sglang_qwen3(self):
        entry = state_at(self.sglang, "Qwen3ForCausalLM", "0.4.10.post2")
        self.assertEqual((entry["status"], entry["rule"]), ("capture", "plus_one"))

    def test_sglang_gpt_oss_boundary_rule(self):
        entry = state_at(self.sglang, "GptOssForCausalLM", self.sglang["releases"][-1])
        self.assertEqual(entry["rule"], "as_is_if_max_is_L")

    def test_vllm_llama_captures_everywhere(self):
        for version in self.vllm["releases"]:
            entry = state_at(self.vllm, "LlamaForCausalLM", version)
            self.assertEqual((entry["status"], entry["rule"]), ("capture", "as_is"), version)

    def test_vllm_kimi_k25(self):
        kimi = "KimiK25ForConditionalGeneration"
        self.assertEqual(state_at(self.vllm, kimi, "0.17.1")["status"], "no_capture")  # not SupportsEagle3
        entry = state_at(self.vllm, kimi, "0.18.0")
        self.assertEqual((entry["status"], entry["rule"]), ("capture", "as_is"))
        self.assertIn("deepseek_v2.py", entry["delegate"])


if __name__ == "__main__":
    unittest.main()
