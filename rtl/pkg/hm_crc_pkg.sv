// CRC-32 (IEEE 802.3, reflected, poly 0xEDB88320) helpers for the ICRC datapaths.
//
// The register convention is zlib's before the final inversion: a byte d is absorbed by
// r ^= d, then eight shift-right steps with conditional XOR of the polynomial. The update is
// linear over GF(2), so a W-byte beat is r' = Z^W * r ^ L(beat), where Z is the "absorb one zero
// byte" map and L is the register a zero register would reach. The functions below are
// evaluated at elaboration time only (constant functions): they build the XOR matrices.
package hm_crc_pkg;
  localparam logic [31:0] HM_CRC_POLY = 32'hEDB88320;
  // Register after the 8 bytes of 0xFF that stand in for the LRH (ROCEV2.md section 5), and
  // also the residue after a good packet including its ICRC bytes.
  localparam logic [31:0] HM_ICRC_SEED = 32'hDEBB20E3;

  // Absorb one zero byte.
  function automatic logic [31:0] hm_crc_zbyte(input logic [31:0] r);
    logic [31:0] x;
    x = r;
    for (int b = 0; b < 8; b++) x = x[0] ? ((x >> 1) ^ HM_CRC_POLY) : (x >> 1);
    return x;
  endfunction

  // Inverse of hm_crc_zbyte (Z is invertible because the polynomial has its x^0 term).
  function automatic logic [31:0] hm_crc_zbyte_inv(input logic [31:0] r);
    logic [31:0] x;
    logic        lsb;
    x = r;
    for (int b = 0; b < 8; b++) begin
      lsb = x[31];
      x = ((x ^ (lsb ? HM_CRC_POLY : 32'h0)) << 1) | {31'h0, lsb};
    end
    return x;
  endfunction

  // Z^n applied to r: n zero bytes absorbed, or for n < 0, -n of them taken back.
  function automatic logic [31:0] hm_crc_zpow(input logic [31:0] r, input int n);
    logic [31:0] x;
    x = r;
    for (int i = 0; i < (n < 0 ? -n : n); i++) x = n < 0 ? hm_crc_zbyte_inv(x) : hm_crc_zbyte(x);
    return x;
  endfunction

  // Matrix of Z^n (n < 0: the inverse): row i is the mask of input bits that form output bit i.
  function automatic logic [31:0][31:0] hm_crc_zpow_matrix(input int n);
    logic [31:0][31:0] m;
    logic [31:0]       c;
    m = '0;
    for (int k = 0; k < 32; k++) begin
      c = hm_crc_zpow(32'h1 << k, n);
      for (int i = 0; i < 32; i++) m[i][k] = c[i];
    end
    return m;
  endfunction

  // ICRC mask templates for the first 128 bytes of a frame, per {vlan, ipv6}: 0 keep,
  // 1 zero (before the IP header), 2 force 0xFF (variant field), 3 force the low nibble to
  // ones (IPv6 byte 0). ROCEV2.md section 5. Used by the RX and TX paths.
  localparam int HM_TPL_BYTES = 128;
  function automatic logic [3:0][HM_TPL_BYTES-1:0][1:0] hm_icrc_mask_templates();
    logic [3:0][HM_TPL_BYTES-1:0][1:0] t;
    int l3, l4;
    t = '0;
    for (int v = 0; v < 4; v++) begin
      l3 = v[1] ? 18 : 14;
      l4 = l3 + (v[0] ? 40 : 20);
      for (int p = 0; p < HM_TPL_BYTES; p++) begin
        if (p < l3) t[v][p] = 2'd1;
        else if (!v[0] && (p == l3 + 1 || p == l3 + 8 || p == l3 + 10 || p == l3 + 11)) t[v][p] = 2'd2;
        else if (v[0] && p == l3) t[v][p] = 2'd3;
        else if (v[0] && (p == l3 + 1 || p == l3 + 2 || p == l3 + 3 || p == l3 + 7)) t[v][p] = 2'd2;
        else if (p == l4 + 6 || p == l4 + 7 || p == l4 + 12) t[v][p] = 2'd2;
      end
    end
    return t;
  endfunction

  // The templates as byte masks, 8 bits per byte of the 128: with set = 0, what the ICRC
  // keeps of the frame (0xFF for codes 0 and 3); with set = 1, what it forces to ones (0xFF
  // for code 2, 0x0F for code 3). A masked header beat is (data & keep) | set, word-level.
  function automatic logic [3:0][8*HM_TPL_BYTES-1:0] hm_icrc_byte_masks(input bit set);
    logic [3:0][HM_TPL_BYTES-1:0][1:0] t;
    logic [3:0][8*HM_TPL_BYTES-1:0]    m;
    t = hm_icrc_mask_templates();
    m = '0;
    for (int v = 0; v < 4; v++)
      for (int p = 0; p < HM_TPL_BYTES; p++)
        unique case (t[v][p])
          2'd0: m[v][8*p +: 8] = set ? 8'h00 : 8'hFF;
          2'd1: m[v][8*p +: 8] = 8'h00;
          2'd2: m[v][8*p +: 8] = set ? 8'hFF : 8'h00;
          default: m[v][8*p +: 8] = set ? 8'h0F : 8'hFF;
        endcase
    return m;
  endfunction

  // Matrix-vector product over GF(2).
  function automatic logic [31:0] hm_crc_matvec(input logic [31:0][31:0] m, input logic [31:0] v);
    logic [31:0] o;
    for (int i = 0; i < 32; i++) o[i] = ^(m[i] & v);
    return o;
  endfunction
endpackage
