"""Artemis password masking (store.config.masking), checked against a real JVM.

The JVM side is a small Java program written here that masks and unmasks with
``javax.crypto`` Blowfish and ``java.math.BigInteger`` the way Artemis's
``DefaultSensitiveStringCodec`` (two-way) does: ``Cipher.getInstance("Blowfish")``, the key's
``getBytes()``, ``new BigInteger(cipherText).toString(16)``, and on decode
``new BigInteger(hex, 16).toByteArray()`` zero-padded at the front to a multiple of 8.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from Crypto.Cipher import Blowfish
from hypothesis import given
from hypothesis import strategies as st

from store.config import masking
from store.errors import ConfigError

JAVA_PROGRAM = r"""
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import javax.crypto.Cipher;
import javax.crypto.spec.SecretKeySpec;

public class Mask {
    static Cipher cipher(int mode, String key) throws Exception {
        Cipher c = Cipher.getInstance("Blowfish");
        c.init(mode, new SecretKeySpec(key.getBytes(), "Blowfish"));
        return c;
    }

    static String mask(String key, String plain) throws Exception {
        byte[] sealed = cipher(Cipher.ENCRYPT_MODE, key).doFinal(plain.getBytes());
        return new BigInteger(sealed).toString(16);
    }

    static String unmask(String key, String masked) throws Exception {
        byte[] raw = new BigInteger(masked, 16).toByteArray();
        int padded = (raw.length + 7) / 8 * 8;
        byte[] block = new byte[padded];
        System.arraycopy(raw, 0, block, padded - raw.length, raw.length);
        return new String(cipher(Cipher.DECRYPT_MODE, key).doFinal(block));
    }

    public static void main(String[] args) throws Exception {
        HexFormat hex = HexFormat.of();
        List<String> out = new ArrayList<>();
        for (String line : Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8)) {
            String[] f = line.split("\t", -1);
            String key = new String(hex.parseHex(f[1]), StandardCharsets.UTF_8);
            try {
                if (f[0].equals("mask")) {
                    String plain = new String(hex.parseHex(f[2]), StandardCharsets.UTF_8);
                    out.add("ok\t" + mask(key, plain));
                } else {
                    String plain = unmask(key, f[2]);
                    out.add("ok\t" + hex.formatHex(plain.getBytes(StandardCharsets.UTF_8)));
                }
            } catch (Exception e) {
                out.add("error\t" + e.getClass().getSimpleName());
            }
        }
        Files.write(Paths.get(args[1]), out, StandardCharsets.UTF_8);
    }
}
"""

DEFAULT = masking.DEFAULT_KEY

# Plain texts chosen for what their cipher text looks like under the default key (checked by
# test_edge_plains_have_the_cipher_texts_they_stand_for): Artemis's signed-hex rendering drops
# leading zero bytes, or a redundant leading 0xFF, which decoding must put back.
LEADING_ZERO = "pw54"  # cipher text 00 3b ...: hex has 7 bytes, padded back to 8
TWO_LEADING_ZEROS = "pw427143"  # 00 00 74 ...: 16-byte cipher text, hex has 14
ZERO_THEN_HIGH_BIT = "pw182"  # 00 ff ...: BigInteger keeps the 0x00, nothing to pad
REDUNDANT_FF = "pw81"  # ff 97 ...: negative; BigInteger drops the 0xff (Artemis then fails)

CASES = [
    pytest.param("", DEFAULT, id="empty"),
    pytest.param("secret", DEFAULT, id="ascii"),
    pytest.param("keypass", DEFAULT, id="docs-example"),
    pytest.param("1234567", DEFAULT, id="7-bytes"),
    pytest.param("12345678", DEFAULT, id="8-bytes"),
    pytest.param("123456789012345", DEFAULT, id="15-bytes"),
    pytest.param("1234567890123456", DEFAULT, id="16-bytes"),
    pytest.param("pässwörd", DEFAULT, id="latin1-letters"),
    pytest.param("пароль-密码", DEFAULT, id="cyrillic-cjk"),
    pytest.param("🔐 key\twith tab", DEFAULT, id="emoji-tab"),
    pytest.param("x" * 200, DEFAULT, id="200-bytes"),
    pytest.param(LEADING_ZERO, DEFAULT, id="leading-zero-byte"),
    pytest.param(TWO_LEADING_ZEROS, DEFAULT, id="two-leading-zero-bytes"),
    pytest.param(ZERO_THEN_HIGH_BIT, DEFAULT, id="zero-then-high-bit"),
    pytest.param("secret", "helloworld", id="custom-key"),
    pytest.param("secret", "abc", id="3-byte-key"),
    pytest.param("secret", "k", id="1-byte-key"),
    pytest.param("secret", "K" * 56, id="56-byte-key"),
    pytest.param("secret", "schlüssel", id="unicode-key"),
]


def _case_values() -> list[tuple[str, str]]:
    values = [(str(p.values[0]), str(p.values[1])) for p in CASES]
    return [*values, (REDUNDANT_FF, DEFAULT)]


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, str], str]:
    """Run the Java program once for every case: (op, key, input) -> 'ok\\t..' / 'error\\t..'."""
    java_bin = shutil.which("java")
    assert java_bin, "a JVM (java on PATH, Java 11+) is needed to check Artemis compatibility"
    work = tmp_path_factory.mktemp("java-mask")
    (work / "Mask.java").write_text(JAVA_PROGRAM, encoding="utf-8")
    requests = []
    for plain, key in _case_values():
        requests.append(("mask", key, plain))
        requests.append(("unmask", key, masking.mask(plain, key=key)))
    lines = [
        f"{op}\t{key.encode().hex()}\t{arg.encode().hex() if op == 'mask' else arg}"
        for op, key, arg in requests
    ]
    (work / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    subprocess.run(
        [java_bin, "-Dfile.encoding=UTF-8", "Mask.java", "in.txt", "out.txt"],
        cwd=work,
        check=True,
        timeout=120,
        capture_output=True,
    )
    answers = (work / "out.txt").read_text(encoding="utf-8").splitlines()
    assert len(answers) == len(requests)
    return dict(zip(requests, answers, strict=True))


@pytest.mark.parametrize(("plain", "key"), CASES)
def test_java_masks_exactly_as_we_do(java, plain, key):
    ours = masking.mask(plain, key=key)
    assert java[("mask", key, plain)] == f"ok\t{ours}"


@pytest.mark.parametrize(("plain", "key"), CASES)
def test_we_unmask_what_java_masked(java, plain, key):
    status, masked = java[("mask", key, plain)].split("\t")
    assert status == "ok"
    assert masking.unmask(masked, key=key) == plain


@pytest.mark.parametrize(("plain", "key"), CASES)
def test_java_unmasks_what_we_masked(java, plain, key):
    ours = masking.mask(plain, key=key)
    assert java[("unmask", key, ours)] == f"ok\t{plain.encode().hex()}"


def test_redundant_leading_ff_decodes_here_though_artemis_cannot(java):
    """Artemis zero-pads a negative number; we sign-extend, so its own output decodes here."""
    masked = masking.mask(REDUNDANT_FF)
    assert java[("mask", DEFAULT, REDUNDANT_FF)] == f"ok\t{masked}"
    assert java[("unmask", DEFAULT, masked)].startswith("error\t")
    assert masking.unmask(masked) == REDUNDANT_FF


@pytest.mark.parametrize(
    ("plain", "prefix"),
    [
        pytest.param(LEADING_ZERO, "00", id="leading-zero"),
        pytest.param(TWO_LEADING_ZEROS, "0000", id="two-leading-zeros"),
        pytest.param(ZERO_THEN_HIGH_BIT, "00ff", id="zero-then-high-bit"),
        pytest.param(REDUNDANT_FF, "ff9", id="redundant-ff"),
    ],
)
def test_edge_plains_have_the_cipher_texts_they_stand_for(plain, prefix):
    raw = Blowfish.new(DEFAULT.encode(), Blowfish.MODE_ECB).encrypt(
        plain.encode() + bytes([8 - len(plain) % 8]) * (8 - len(plain) % 8)
    )
    assert raw.hex().startswith(prefix)


@pytest.mark.parametrize(
    ("masked", "plain"),
    [
        pytest.param("-5a2376c61c668aaf", "keypass", id="artemis-docs-example"),
        pytest.param("-41e444c3ed07d6dd", "secret", id="secret"),
        pytest.param("+22fa49a8d8fa115d", "", id="explicit-plus-sign"),
        pytest.param("  22FA49A8D8FA115D ", "", id="upper-case-and-blanks"),
    ],
)
def test_known_masked_values_decode(masked, plain):
    assert masking.unmask(masked) == plain


def test_masked_value_is_signed_lower_case_hex():
    assert masking.mask("secret") == "-41e444c3ed07d6dd"
    assert masking.mask("") == "22fa49a8d8fa115d"


def test_key_comes_from_the_environment_when_not_given(monkeypatch):
    monkeypatch.setenv(masking.KEY_ENV_VAR, "helloworld")
    assert masking.mask("secret") == masking.mask("secret", key="helloworld")
    assert masking.unmask(masking.mask("secret", key="helloworld")) == "secret"


def test_key_argument_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv(masking.KEY_ENV_VAR, "helloworld")
    assert masking.mask("secret", key=DEFAULT) == "-41e444c3ed07d6dd"


@pytest.mark.parametrize("blank", ["", "   "], ids=["empty", "blanks"])
def test_blank_environment_key_means_the_default(monkeypatch, blank):
    monkeypatch.setenv(masking.KEY_ENV_VAR, blank)
    assert masking.mask("secret") == "-41e444c3ed07d6dd"


@pytest.mark.parametrize(
    ("masked", "key"),
    [
        pytest.param("not-hex", None, id="not-hex"),
        pytest.param("", None, id="empty"),
        pytest.param("12_34", None, id="underscore"),
        pytest.param("-41e444c3ed07d6dd", "wrong key", id="wrong-key"),
        pytest.param("1234", None, id="not-a-cipher-text"),
    ],
)
def test_undecodable_value_names_the_setting_never_the_value(masked, key):
    with pytest.raises(ConfigError) as info:
        masking.unmask(masked, key=key, setting="jdbc-password")
    err = info.value
    assert err.key == "jdbc-password"
    assert err.value == "<hidden>"
    assert "jdbc-password" in str(err)
    if masked.strip():
        assert masked not in str(err)
    if key:
        assert key not in str(err)


@pytest.mark.parametrize(
    "key", [pytest.param("", id="empty"), pytest.param("k" * 57, id="57-bytes")]
)
def test_unusable_key_is_config_error_without_the_key(key):
    with pytest.raises(ConfigError) as info:
        masking.mask("secret", key=key)
    assert info.value.key == "key"
    if key:
        assert key not in str(info.value)


def test_lone_surrogate_cannot_be_masked():
    with pytest.raises(ConfigError):
        masking.mask("\ud800")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("ENC(-41e444c3ed07d6dd)", "secret", id="enc"),
        pytest.param("  ENC(-41e444c3ed07d6dd) ", "secret", id="enc-with-blanks"),
        pytest.param("-41e444c3ed07d6dd", "-41e444c3ed07d6dd", id="bare-hex-stays"),
        pytest.param("enc(-41e444c3ed07d6dd)", "enc(-41e444c3ed07d6dd)", id="lower-case-stays"),
        pytest.param("ENC(abc", "ENC(abc", id="unclosed-stays"),
        pytest.param("plain", "plain", id="plain"),
    ],
)
def test_decode_value_unwraps_only_enc(value, expected):
    assert masking.decode_value(value) == expected


def test_wrap_and_unwrap_are_inverse():
    assert masking.wrap_enc("-41e4") == "ENC(-41e4)"
    assert masking.unwrap_enc("ENC(-41e4)") == "-41e4"
    assert masking.unwrap_enc("-41e4") == "-41e4"
    assert masking.is_enc("ENC(x)") and not masking.is_enc("ENC(x")


def test_empty_enc_is_an_error_not_a_literal_password():
    with pytest.raises(ConfigError) as info:
        masking.decode_value("ENC()", setting="jdbc-password")
    assert info.value.key == "jdbc-password"


_TEXT = st.characters(exclude_categories=["Cs"])  # lone surrogates are not text


@given(
    st.text(_TEXT, max_size=64),
    st.text(_TEXT, min_size=1, max_size=14),  # at most 56 bytes of UTF-8
)
def test_unmask_inverts_mask_for_any_text_and_key(plain, key):
    masked = masking.mask(plain, key=key)
    assert masking.unmask(masked, key=key) == plain
    assert masking.decode_value(masking.wrap_enc(masked), key=key) == plain
