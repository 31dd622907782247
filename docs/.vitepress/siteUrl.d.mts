/** Where the documentation site is published; ends in `/`. */
export declare const siteUrl: string;
