// Where a webhook may go, as a pure rule: public unicast addresses over https only, whatever way an
// inward address is written, unless the operator allows a network or plain http.
import { expect } from "chai";
import { DomainError } from "@switchyard/platform/domain-error.js";
import { addressRefusal, CLOSED_POLICY, parseNetworks } from "../src/domain/destinations.js";
import { checkResolvedAddresses, validateEndpointUrl, validateEventTypes } from "../src/domain/endpoints.js";

const LOCAL_MESH = { allowPlainHttp: true, allowedNetworks: parseNetworks("127.0.0.0/8, ::1/128") };

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    expect(err).to.be.instanceOf(DomainError);
    expect((err as DomainError).reason).to.equal("RULE_VIOLATION");
    return (err as DomainError).message;
  }
  throw new Error("expected a refusal");
}

describe("webhook destinations", () => {
  const inward: [string, string][] = [
    ["127.0.0.1", "loopback"],
    ["::1", "loopback"],
    ["::ffff:127.0.0.1", "loopback"],
    ["10.0.0.1", "private"],
    ["172.16.5.4", "private"],
    ["192.168.1.1", "private"],
    ["169.254.169.254", "linkLocal"],
    ["fe80::1", "linkLocal"],
    ["fd00:ec2::254", "uniqueLocal"],
    ["100.100.100.200", "carrierGradeNat"],
    ["0.0.0.0", "unspecified"],
    ["::", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["ff02::1", "multicast"],
    ["255.255.255.255", "broadcast"],
    ["192.0.2.1", "reserved"],
    ["64:ff9b::a00:1", "rfc6052"],
    ["2002:a00:1::", "6to4"],
    // IPv6 every way an attacker writes an inward address (issue 45, "attack it").
    ["fc00::1", "uniqueLocal"],
    ["fdff:ffff::1", "uniqueLocal"],
    ["febf:ffff::1", "linkLocal"],
    ["ff00::1", "multicast"],
    ["ff0e::1", "multicast"],
    ["::ffff:10.0.0.1", "private"],
    ["::ffff:169.254.169.254", "linkLocal"],
    ["64:ff9b:1::a00:1", "rfc6052"],
    ["2002:c0a8:101::1", "6to4"],
    ["2001::a00:1", "teredo"],
    ["2001:db8::1", "reserved"],
    ["::a00:1", "notGlobalUnicast"],
    ["::7f00:1", "notGlobalUnicast"],
    ["fec0::1", "deprecatedSiteLocal"],
    ["4000::1", "notGlobalUnicast"],
  ];
  for (const [address, range] of inward)
    it(`refuses ${address} (${range})`, () => {
      expect(addressRefusal(address, CLOSED_POLICY)).to.equal(range);
    });

  it("takes public unicast addresses, v4 and v6", () => {
    for (const address of ["8.8.8.8", "93.184.216.34", "2606:4700:4700::1111", "2606:4700::1111", "::ffff:8.8.8.8"])
      expect(addressRefusal(address, CLOSED_POLICY), address).to.equal(undefined);
  });

  it("takes the networks the operator allows, and only those", () => {
    expect(addressRefusal("127.0.0.1", LOCAL_MESH)).to.equal(undefined);
    expect(addressRefusal("::1", LOCAL_MESH)).to.equal(undefined);
    expect(addressRefusal("::ffff:127.0.0.2", LOCAL_MESH)).to.equal(undefined);
    expect(addressRefusal("10.0.0.1", LOCAL_MESH)).to.equal("private");
    expect(addressRefusal("169.254.169.254", LOCAL_MESH)).to.equal("linkLocal");
    expect(() => parseNetworks("127.0.0.1")).to.throw(/CIDR/);
  });

  it("refuses URLs that are not absolute https, carry credentials or a fragment, or are too long", () => {
    expect(refusal(() => validateEndpointUrl("http://example.com/hook", CLOSED_POLICY))).to.match(/must be https/);
    expect(refusal(() => validateEndpointUrl("/hook", CLOSED_POLICY))).to.match(/absolute/);
    expect(refusal(() => validateEndpointUrl("ftp://example.com/", LOCAL_MESH))).to.match(/http or https/);
    expect(refusal(() => validateEndpointUrl("https://u:p@example.com/", CLOSED_POLICY))).to.match(/credentials/);
    expect(refusal(() => validateEndpointUrl("https://example.com/#x", CLOSED_POLICY))).to.match(/fragment/);
    expect(refusal(() => validateEndpointUrl(`https://example.com/${"a".repeat(2048)}`, CLOSED_POLICY))).to.match(
      /2048/,
    );
    expect(validateEndpointUrl("https://example.com/hook?a=1", CLOSED_POLICY).href).to.equal(
      "https://example.com/hook?a=1",
    );
    expect(validateEndpointUrl("http://127.0.0.1:9/hook", LOCAL_MESH).href).to.equal("http://127.0.0.1:9/hook");
  });

  it("refuses an inward address however the URL writes it", () => {
    for (const url of [
      "https://127.0.0.1/",
      "https://169.254.169.254/latest/meta-data/",
      "https://2130706433/",
      "https://0x7f.1/",
      "https://[::1]/",
      "https://[::ffff:169.254.169.254]/",
      "https://[::]/",
      "https://[fd00:ec2::254]/",
      "https://[::ffff:a00:1]/",
      "https://[64:ff9b::a00:1]/",
      "https://10.1/",
    ])
      expect(
        refusal(() => validateEndpointUrl(url, CLOSED_POLICY)),
        url,
      ).to.match(/address, which is not reachable/);
  });

  it("refuses a name that resolves to nothing, or to any inward address among public ones", () => {
    expect(refusal(() => checkResolvedAddresses("nowhere.test", [], CLOSED_POLICY))).to.match(/does not resolve/);
    expect(
      refusal(() => checkResolvedAddresses("inward.example", ["93.184.216.34", "10.0.0.1"], CLOSED_POLICY)),
    ).to.match(/resolves to a private address/);
    expect(refusal(() => checkResolvedAddresses("v6-loopback.example", ["::1"], CLOSED_POLICY))).to.match(
      /resolves to a loopback address/,
    );
    expect(
      refusal(() => checkResolvedAddresses("v6-metadata.example", ["2606:4700::1111", "fd00:ec2::254"], CLOSED_POLICY)),
    ).to.match(/resolves to a uniqueLocal address/);
    checkResolvedAddresses("example.com", ["93.184.216.34", "2606:2800:220:1::"], CLOSED_POLICY);
  });

  it("takes known event types, each once, and refuses none or an unknown one", () => {
    expect(validateEventTypes(["order.paid", "payment.succeeded", "order.paid"])).to.deep.equal([
      "order.paid",
      "payment.succeeded",
    ]);
    expect(refusal(() => validateEventTypes([]))).to.match(/at least one/);
    expect(refusal(() => validateEventTypes(["payment.failed"]))).to.match(/unknown type payment.failed/);
  });
});
