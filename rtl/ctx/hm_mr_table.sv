// Memory region table and access checker.
//
// Each entry: valid, 8-bit tag, protection domain, base address, length, access rights. A key
// is (index << 8) | tag, so a key kept after its region was deregistered and the slot reused
// (with a new tag) no longer matches. The check port validates one access per cycle, fully
// pipelined, in this order (the first failure is reported):
//   1 bad key   index out of range, entry invalid, or tag mismatch
//   2 PD        protection domain differs
//   3 access    the access needs a right the region does not grant (local read always allowed)
//   4 bounds    [addr, addr+len) not inside [base, base+length) (64-bit overflow is a failure)
// This is the rule of model::transport::mem::MrTable::check; callers skip the check for
// zero-length remote accesses as IBTA allows. A check issued in the same cycle as a write to
// its entry sees the entry as it was before the write.
module hm_mr_table #(
  // Number of entries (power of two).
  parameter int NUM_MRS = 4096,
  // Width of the check request ID returned with the result.
  parameter int ID_WIDTH = 8,
  // Index bits (derived).
  localparam int IW = $clog2(NUM_MRS)
) (
  input  logic                clk,
  input  logic                rst,

  // Table writes (from the control bus): valid_entry 0 clears the entry
  input  logic [IW-1:0]       s_wr_index,
  input  logic                s_wr_entry_valid,
  input  logic [7:0]          s_wr_tag,
  input  logic [31:0]         s_wr_pd,
  input  logic [63:0]         s_wr_base,
  input  logic [63:0]         s_wr_len,
  input  logic [3:0]          s_wr_access,   // {remote_atomic, remote_write, remote_read, local_write}
  input  logic                s_wr_valid,
  output logic                s_wr_ready,

  // Checks
  input  logic [31:0]         s_chk_key,
  input  logic [31:0]         s_chk_pd,
  input  logic [63:0]         s_chk_addr,
  input  logic [63:0]         s_chk_len,
  input  logic [2:0]          s_chk_need,    // HM_MRN_* (hm_desc_pkg); HM_MRN_INVALIDATE: key and PD checked, on success the entry stops matching until rewritten
  input  logic [ID_WIDTH-1:0] s_chk_id,
  input  logic                s_chk_valid,
  output logic                s_chk_ready,

  // Results, in request order
  output logic                m_res_ok,
  output logic [2:0]          m_res_err,     // HM_MRE_* (hm_desc_pkg)
  output logic [63:0]         m_res_base,    // the region's base (for address translation)
  output logic [63:0]         m_res_end,     // base + length, saturated (for checkers that cache the region)
  output logic [ID_WIDTH-1:0] m_res_id,
  output logic                m_res_valid,
  input  logic                m_res_ready,

  // Pulses when an entry changes (a write or an invalidation): cached verdicts are stale
  output logic                m_changed
);
  typedef struct packed {
    logic        valid;
    logic [7:0]  tag;
    logic [31:0] pd;
    logic [63:0] base;
    logic [63:0] len;
    logic [3:0]  access;
  } entry_t;

  entry_t mem [NUM_MRS];
  logic [NUM_MRS-1:0] inval_q;       // invalidated by a SEND with invalidate

  // Writes: one per cycle, never blocked
  assign s_wr_ready = 1'b1;
  always_ff @(posedge clk) begin
    if (s_wr_valid)
      mem[s_wr_index] <= '{valid: s_wr_entry_valid, tag: s_wr_tag, pd: s_wr_pd,
                           base: s_wr_base, len: s_wr_len, access: s_wr_access};
  end
  logic          inv_set;
  logic [IW-1:0] inv_idx;
  always_ff @(posedge clk) begin
    if (rst) inval_q <= '0;
    else begin
      if (inv_set) inval_q[inv_idx] <= 1'b1;
      if (s_wr_valid) inval_q[s_wr_index] <= 1'b0;
    end
  end

  // Checks: a pipeline that advances as a whole when the output skid has room
  logic adv;
  assign s_chk_ready = adv;

  // C1: registered request, table read
  logic                c1_v;
  logic [31:0]         c1_key, c1_pd;
  logic [63:0]         c1_addr, c1_len;
  logic [2:0]          c1_need;
  logic [ID_WIDTH-1:0] c1_id;
  entry_t              c1_e;
  logic                c1_inval;
  always_ff @(posedge clk) begin
    if (adv) begin
      c1_key <= s_chk_key; c1_pd <= s_chk_pd; c1_addr <= s_chk_addr; c1_len <= s_chk_len;
      c1_need <= s_chk_need; c1_id <= s_chk_id;
      c1_e <= mem[s_chk_key[8 +: IW]];
      c1_inval <= inval_q[s_chk_key[8 +: IW]];
    end
    if (rst) c1_v <= 1'b0;
    else if (adv) c1_v <= s_chk_valid;
  end

  // C2: key/PD/access verdicts; the two sums for the bounds check
  logic                c2_v, c2_badkey, c2_pd, c2_acc;
  logic [64:0]         c2_end, c2_lim;
  logic [63:0]         c2_addr, c2_base;
  logic [ID_WIDTH-1:0] c2_id;
  logic                c2_inv;
  logic [IW-1:0]       c2_idx;
  always_ff @(posedge clk) begin
    if (adv) begin
      logic ok;
      c2_badkey <= !c1_e.valid || c1_inval || c1_e.tag != c1_key[7:0] ||
                   (IW < 24 && (c1_key[31:8] >> IW) != '0);
      c2_pd     <= c1_e.pd != c1_pd;
      case (c1_need)
        hm_desc_pkg::HM_MRN_LOCAL_READ:    ok = 1'b1;
        hm_desc_pkg::HM_MRN_LOCAL_WRITE:   ok = (c1_e.access & hm_desc_pkg::HM_MRA_LOCAL_WRITE) != '0;
        hm_desc_pkg::HM_MRN_REMOTE_READ:   ok = (c1_e.access & hm_desc_pkg::HM_MRA_REMOTE_READ) != '0;
        hm_desc_pkg::HM_MRN_REMOTE_WRITE:  ok = (c1_e.access & hm_desc_pkg::HM_MRA_REMOTE_WRITE) != '0;
        hm_desc_pkg::HM_MRN_REMOTE_ATOMIC: ok = (c1_e.access & hm_desc_pkg::HM_MRA_REMOTE_ATOMIC) != '0;
        hm_desc_pkg::HM_MRN_INVALIDATE:    ok = 1'b1;
        default: ok = 1'b0;
      endcase
      c2_acc  <= !ok;
      c2_end  <= {1'b0, c1_addr} + {1'b0, c1_len};
      c2_lim  <= {1'b0, c1_e.base} + {1'b0, c1_e.len};
      c2_addr <= c1_addr;
      c2_base <= c1_e.base;
      c2_id   <= c1_id;
      c2_inv  <= c1_need == hm_desc_pkg::HM_MRN_INVALIDATE;
      c2_idx  <= c1_key[8 +: IW];
    end
    if (rst) c2_v <= 1'b0;
    else if (adv) c2_v <= c1_v;
  end

  // C3: bounds, priority; into the output skid
  logic [2:0] err;
  always_comb begin
    logic oob;
    // end must not overflow 64 bits; the region's end saturates at 2^64 - 1
    oob = !c2_inv && (c2_end[64] || c2_addr < c2_base ||
          c2_end[63:0] > (c2_lim[64] ? 64'hFFFF_FFFF_FFFF_FFFF : c2_lim[63:0]));
    if (c2_badkey)  err = hm_desc_pkg::HM_MRE_BAD_KEY;
    else if (c2_pd) err = hm_desc_pkg::HM_MRE_PD;
    else if (c2_acc) err = hm_desc_pkg::HM_MRE_ACCESS;
    else if (oob)   err = hm_desc_pkg::HM_MRE_BOUNDS;
    else            err = hm_desc_pkg::HM_MRE_OK;
  end

  // an invalidation takes effect when its (successful) verdict leaves the pipeline
  assign inv_set = c2_v && adv && c2_inv && err == hm_desc_pkg::HM_MRE_OK;
  assign inv_idx = c2_idx;

  logic [63:0] c2_end_sat;
  assign c2_end_sat = c2_lim[64] ? 64'hFFFF_FFFF_FFFF_FFFF : c2_lim[63:0];
  always_ff @(posedge clk) m_changed <= !rst && (s_wr_valid || inv_set);

  localparam int OW = 1 + 3 + 64 + 64 + ID_WIDTH;
  logic [OW-1:0] o_pack, m_pack;
  assign o_pack = {err == hm_desc_pkg::HM_MRE_OK, err, c2_base, c2_end_sat, c2_id};
  hm_skid #(.WIDTH(OW)) u_out (
    .clk, .rst,
    .s_data(o_pack), .s_valid(c2_v), .s_ready(adv),
    .m_data(m_pack), .m_valid(m_res_valid), .m_ready(m_res_ready)
  );
  assign {m_res_ok, m_res_err, m_res_base, m_res_end, m_res_id} = m_pack;

  logic unused_ok;
  assign unused_ok = ^{c1_key};

  if ((1 << IW) != NUM_MRS || IW > 24) begin : g_bad_size
    $error("hm_mr_table: NUM_MRS must be a power of two up to 2^24");
  end
endmodule
