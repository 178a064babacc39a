"""Every knob has a JANUS_* environment override; tests patch knobs only via config.patch."""
import os
import subprocess
import sys

import pytest

import janus


def test_patch_restores_and_unknown_knobs_are_errors():
    before = janus.config.profile_calls
    with janus.config.patch(profile_calls=7):
        assert janus.config.profile_calls == 7
    assert janus.config.profile_calls == before
    with pytest.raises(AttributeError, match='no knob'):
        janus.config.not_a_knob = 1


def test_environment_overrides():
    env = dict(os.environ, JANUS_STRICT='1', JANUS_PROFILE_CALLS='5', JANUS_CACHE_SIZE_LIMIT='2')
    code = 'import janus; c = janus.config; print(c.strict, c.profile_calls, c.cache_size_limit)'
    out = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ['True', '5', '2']
