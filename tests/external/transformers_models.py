"""transformers' common model tester over four architectures, for the unpacked transformers sdist.

The sdist ships ``tests/test_modeling_common.py`` (``ModelTesterMixin``: a few hundred tests that any model
class must pass) but not the per-architecture modules of the repository's ``tests/models/`` that feed it
with a small configuration and inputs. This module is that feed: ``tests/external/suites.py`` copies it
into the sdist's ``tests/`` and runs it there. Each test class gives the mixin a tiny model of one
architecture (2 layers, hidden size 32) and random token ids placed on ``torch_device``. The generative
ones also name ``GenerationTesterMixin``, as transformers' own check of that asks; the sdist lacks its
module, and the empty one suites.py adds runs no generate() tests.
"""

import unittest

from transformers import (
    BertConfig,
    BertForMaskedLM,
    BertForSequenceClassification,
    BertModel,
    GPT2Config,
    GPT2ForSequenceClassification,
    GPT2LMHeadModel,
    GPT2Model,
    LlamaConfig,
    LlamaForCausalLM,
    LlamaForSequenceClassification,
    LlamaModel,
    T5Config,
    T5ForConditionalGeneration,
    T5Model,
)

from .generation.test_utils import GenerationTesterMixin
from .test_modeling_common import ModelTesterMixin, ids_tensor, random_attention_mask


class TinyModels:
    """What ``ModelTesterMixin`` asks of ``self.model_tester``: sizes, a configuration, inputs."""

    batch_size = 2
    seq_length = 7
    vocab_size = 99
    hidden_size = 32
    num_hidden_layers = 2
    num_attention_heads = 4
    is_training = True
    num_labels = 3

    def __init__(self, make_config, encoder_decoder=False):
        self.make_config = make_config
        self.encoder_decoder = encoder_decoder

    def get_config(self):
        return self.make_config(self)

    def prepare_config_and_inputs_for_common(self):
        shape = [self.batch_size, self.seq_length]
        inputs = {"input_ids": ids_tensor(shape, self.vocab_size), "attention_mask": random_attention_mask(shape)}
        if self.encoder_decoder:
            inputs["decoder_input_ids"] = ids_tensor(shape, self.vocab_size)
            inputs["decoder_attention_mask"] = random_attention_mask(shape)
        return self.get_config(), inputs


def bert(t):
    return BertConfig(vocab_size=t.vocab_size, hidden_size=t.hidden_size, num_hidden_layers=t.num_hidden_layers,
                      num_attention_heads=t.num_attention_heads, intermediate_size=37, max_position_embeddings=64,
                      num_labels=t.num_labels, pad_token_id=0)


def gpt2(t):
    return GPT2Config(vocab_size=t.vocab_size, n_embd=t.hidden_size, n_layer=t.num_hidden_layers,
                      n_head=t.num_attention_heads, n_positions=64, num_labels=t.num_labels, pad_token_id=0)


def llama(t):
    return LlamaConfig(vocab_size=t.vocab_size, hidden_size=t.hidden_size, num_hidden_layers=t.num_hidden_layers,
                       num_attention_heads=t.num_attention_heads, num_key_value_heads=2, intermediate_size=37,
                       max_position_embeddings=64, num_labels=t.num_labels, pad_token_id=0)


def t5(t):
    return T5Config(vocab_size=t.vocab_size, d_model=t.hidden_size, d_kv=8, d_ff=37, num_layers=t.num_hidden_layers,
                    num_heads=t.num_attention_heads, relative_attention_num_buckets=8, pad_token_id=0,
                    decoder_start_token_id=0, eos_token_id=1)


class Architecture(ModelTesterMixin):
    make_config = None  # one of the functions above

    def setUp(self):
        self.model_tester = TinyModels(type(self).make_config, self.is_encoder_decoder)


class BertModelTest(Architecture, unittest.TestCase):
    make_config = bert
    all_model_classes = (BertModel, BertForMaskedLM, BertForSequenceClassification)


class GPT2ModelTest(Architecture, GenerationTesterMixin, unittest.TestCase):
    make_config = gpt2
    all_model_classes = (GPT2Model, GPT2LMHeadModel, GPT2ForSequenceClassification)


class LlamaModelTest(Architecture, GenerationTesterMixin, unittest.TestCase):
    make_config = llama
    all_model_classes = (LlamaModel, LlamaForCausalLM, LlamaForSequenceClassification)


class T5ModelTest(Architecture, GenerationTesterMixin, unittest.TestCase):
    make_config = t5
    all_model_classes = (T5Model, T5ForConditionalGeneration)
    is_encoder_decoder = True
