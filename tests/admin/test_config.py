"""Target resolution: flags > environment > named context > client.conf > the default engine."""

import pytest

from pulsar_txn_cli.target.settings import parse_properties, resolve
from pulsar_txn_cli.target.settings import TargetFlags
from pulsar_txn_cli.errors import UsageError

PULSARCTL = """\
auth-info:
  prod:
    locationoforigin: /home/me/.config/pulsar/config
    tls_trust_certs_file_path: "/etc/ca.pem"
    tls_allow_insecure_connection: false
    token: ctx-token-123   # a comment
    tokenFile: ""
  dev:
    token: ""
contexts:
  prod:
    admin-service-url: https://prod.example:8443
    bookie-service-url: http://prod.example:8083
  dev:
    admin-service-url: "http://dev.example:8080"
current-context: prod
"""

CLIENT_CONF = """\
# Pulsar client configuration
webServiceUrl=http://conf.example:8080/
brokerServiceUrl=pulsar://conf.example:6650/
authPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken
authParams=token:conf-token-456
tlsAllowInsecureConnection=false
tlsEnableHostnameVerification = false
tlsTrustCertsFilePath=
"""


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    (home / ".config" / "pulsar").mkdir(parents=True)
    (home / ".config" / "pulsar" / "config").write_text(PULSARCTL)
    return home


@pytest.fixture
def conf(tmp_path):
    path = tmp_path / "client.conf"
    path.write_text(CLIENT_CONF)
    return path


def test_default_is_the_engine_in_the_data_directory(tmp_path):
    target = resolve(TargetFlags(), environ={})
    assert target.kind == "engine" and target.engine_dir.endswith("pulsar-txn/engine")
    assert target.describe() == f"engine {target.engine_dir}"


def test_client_conf(conf):
    target = resolve(TargetFlags(), environ={"PULSAR_CLIENT_CONF": str(conf)})
    assert (target.kind, target.url, target.token) == ("cluster", "http://conf.example:8080", "conf-token-456")
    assert target.tls_enable_hostname_verification is False
    assert target.source == f"client.conf {conf}"


def test_context_beats_client_conf(conf, home):
    env = {"PULSAR_CLIENT_CONF": str(conf)}
    target = resolve(TargetFlags(context="prod"), environ=env, home=home)
    assert (target.url, target.token, target.tls_trust_cert_path) == (
        "https://prod.example:8443",
        "ctx-token-123",
        "/etc/ca.pem",
    )
    # settings the context lacks still come from client.conf
    assert target.tls_enable_hostname_verification is False


def test_context_from_the_environment(home):
    target = resolve(TargetFlags(), environ={"PULSAR_TXN_CONTEXT": "dev"}, home=home)
    assert target.url == "http://dev.example:8080" and target.token is None


def test_environment_beats_context(home, tmp_path):
    env = {"PULSAR_TXN_ADMIN_URL": "http://env.example:8080", "PULSAR_TXN_TOKEN": "env-token-789"}
    target = resolve(TargetFlags(context="prod"), environ=env, home=home)
    assert (target.url, target.token, target.source) == ("http://env.example:8080", "env-token-789", "environment")


def test_environment_engine_dir_beats_client_conf(conf, tmp_path):
    env = {"PULSAR_CLIENT_CONF": str(conf), "PULSAR_TXN_ENGINE_DIR": str(tmp_path / "e")}
    target = resolve(TargetFlags(), environ=env)
    assert target.kind == "engine" and target.engine_dir == str(tmp_path / "e")


def test_flags_beat_everything(conf, home, tmp_path):
    env = {
        "PULSAR_CLIENT_CONF": str(conf),
        "PULSAR_TXN_ADMIN_URL": "http://env.example:8080",
        "PULSAR_TXN_TOKEN": "env-token-789",
    }
    target = resolve(
        TargetFlags(admin_url="http://flag.example:8080", token="flag-token-000", context="prod"),
        environ=env,
        home=home,
    )
    assert (target.url, target.token, target.source) == ("http://flag.example:8080", "flag-token-000", "flags")
    engine = resolve(TargetFlags(engine_dir=str(tmp_path)), environ=env, home=home)
    assert engine.kind == "engine"


def test_admin_url_with_engine_dir_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="only one target"):
        resolve(TargetFlags(admin_url="http://x:8080", engine_dir=str(tmp_path)), environ={})


def test_both_on_the_command_line_exit_2(cli, tmp_path):
    result = cli(["coordinator-stats", "--admin-url", "http://x:8080", "--engine-dir", str(tmp_path)])
    assert result.exit_code == 2 and "only one target" in result.stderr


@pytest.mark.parametrize(
    "flags, token",
    [
        (dict(auth_params="token:abc.def.ghi"), "abc.def.ghi"),
        (dict(auth_params='{"token": "json-token"}'), "json-token"),
        (
            dict(auth_plugin="org.apache.pulsar.client.impl.auth.AuthenticationToken", auth_params="bare-token"),
            "bare-token",
        ),
    ],
)
def test_auth_params(flags, token):
    assert resolve(TargetFlags(admin_url="http://x:8080", **flags), environ={}).token == token


def test_token_files(tmp_path):
    path = tmp_path / "token.txt"
    path.write_text("file-token-1\n")
    assert resolve(TargetFlags(admin_url="http://x:8080", token_file=str(path)), environ={}).token == "file-token-1"
    assert (
        resolve(TargetFlags(admin_url="http://x:8080", auth_params=f"file://{path}"), environ={}).token
        == "file-token-1"
    )
    with pytest.raises(UsageError, match="cannot read the token file"):
        resolve(TargetFlags(admin_url="http://x:8080", token_file=str(tmp_path / "missing")), environ={})


def test_tls_client_certificates_from_auth_params():
    target = resolve(
        TargetFlags(
            admin_url="https://x:8443",
            auth_plugin="org.apache.pulsar.client.impl.auth.AuthenticationTls",
            auth_params="tlsCertFile:/c.pem,tlsKeyFile:/k.pem",
        ),
        environ={},
    )
    assert (target.tls_cert_file, target.tls_key_file, target.token) == ("/c.pem", "/k.pem", None)


def test_unsupported_plugin_and_bad_url():
    with pytest.raises(UsageError, match="not supported"):
        resolve(
            TargetFlags(
                admin_url="http://x:8080",
                auth_plugin="org.apache.pulsar.client.impl.auth.AuthenticationSasl",
                auth_params="{}",
            ),
            environ={},
        )
    with pytest.raises(UsageError, match="http:// or https://"):
        resolve(TargetFlags(admin_url="broker:8080"), environ={})


def test_unknown_context_names_the_known_ones(home):
    with pytest.raises(UsageError, match="known: dev, prod"):
        resolve(TargetFlags(context="staging"), environ={}, home=home)


def test_token_is_not_in_the_repr():
    target = resolve(TargetFlags(admin_url="http://x:8080", token="very-secret-token"), environ={})
    assert "very-secret-token" not in repr(target)


def test_properties_parser():
    props = parse_properties("a=1\nb : 2\nc 3\n! comment\nd=multi \\\n   line\ne=\n")
    assert props == {"a": "1", "b": "2", "c": "3", "d": "multi line", "e": ""}


def test_pulsarctl_config_that_is_not_yaml_is_one_sentence(tmp_path):
    bad = tmp_path / "config"
    bad.write_text("contexts:\n  prod: [unclosed\n")
    with pytest.raises(UsageError, match=r"is not valid YAML \(line \d+\)"):
        resolve(TargetFlags(context="prod"), environ={"PULSARCONFIG": str(bad)})


# --- client.conf as Java reads it, pulsarctl's current context, basic authentication --------------

JAVA_CONF = r"""# written the Java way: escapes, ':' separators, continuation lines
webServiceUrl\: = https\://java.example\:8443/
authPlugin : org.apache.pulsar.client.impl.auth.AuthenticationTLS
authParams = tlsCertFile:/etc/pulsar/client.cert.pem,\
             tlsKeyFile:/etc/pulsar/client.key-pk8.pem
tlsTrustCertsFilePath=/etc/pulsar/ca\u002Ecert.pem
"""


def test_client_conf_is_read_as_java_reads_properties(tmp_path):
    conf = tmp_path / "client.conf"
    conf.write_text(JAVA_CONF.replace(r"webServiceUrl\: =", "webServiceUrl ="))
    target = resolve(TargetFlags(), environ={"PULSAR_CLIENT_CONF": str(conf)})
    assert target.url == "https://java.example:8443"
    assert (target.tls_cert_file, target.tls_key_file) == (
        "/etc/pulsar/client.cert.pem",
        "/etc/pulsar/client.key-pk8.pem",
    )
    assert target.tls_trust_cert_path == "/etc/pulsar/ca.cert.pem"


def test_client_conf_tls_key_pair_keys(tmp_path):
    conf = tmp_path / "client.conf"
    conf.write_text("webServiceUrl=https://b:8443\ntlsCertificateFilePath=/c.pem\ntlsKeyFilePath=/k.pem\n")
    target = resolve(TargetFlags(), environ={"PULSAR_CLIENT_CONF": str(conf)})
    assert (target.tls_cert_file, target.tls_key_file) == ("/c.pem", "/k.pem")


def test_pulsar_home_client_conf_when_the_variable_is_unset(tmp_path):
    (tmp_path / "pulsar" / "conf").mkdir(parents=True)
    (tmp_path / "pulsar" / "conf" / "client.conf").write_text(CLIENT_CONF)
    target = resolve(TargetFlags(), environ={"PULSAR_HOME": str(tmp_path / "pulsar")}, home=tmp_path / "nohome")
    assert target.url == "http://conf.example:8080" and target.source.startswith("client.conf ")


def test_pulsarctl_current_context_when_none_is_named(home):
    target = resolve(TargetFlags(), environ={}, home=home)
    assert target.url == "https://prod.example:8443" and target.token == "ctx-token-123"
    assert target.source.startswith("pulsarctl current-context prod")
    # client.conf comes before the current context; a named context before both
    assert resolve(TargetFlags(context="dev"), environ={}, home=home).url == "http://dev.example:8080"


def test_pulsarconfig_names_pulsarctls_file(home, tmp_path):
    moved = tmp_path / "elsewhere.yaml"
    moved.write_text(PULSARCTL.replace("current-context: prod", "current-context: dev"))
    target = resolve(TargetFlags(), environ={"PULSARCONFIG": str(moved)}, home=home)
    assert target.url == "http://dev.example:8080"


def test_basic_authentication_in_both_spellings():
    for params in ('{"userId": "ops", "password": "s3cret:x"}', "userId:ops,password:s3cret"):
        target = resolve(
            TargetFlags(
                admin_url="http://b:8080",
                auth_plugin="org.apache.pulsar.client.impl.auth.AuthenticationBasic",
                auth_params=params,
            ),
            environ={},
        )
        assert target.basic[0] == "ops" and target.basic[1].startswith("s3cret")
        assert "s3cret" not in repr(target)
    with pytest.raises(UsageError, match="needs userId and password"):
        resolve(
            TargetFlags(admin_url="http://b:8080", auth_plugin="AuthenticationBasic", auth_params="userId:ops"),
            environ={},
        )
